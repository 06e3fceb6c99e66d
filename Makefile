# dio: build, test and lint. `make test` is the full check; as root it also
# runs the filesystem matrix (scripts/test-matrix.sh), skipping and naming
# each leg whose tools are missing.

GO      ?= go
DIR     ?= $(or $(TMPDIR),/tmp)
STATICCHECK  := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# pebblefs/ is a module of its own (Pebble stays out of dio's go.mod), so
# ./... above does not reach it: test and lint name it. -short keeps its
# race run to two metamorphic seeds and two kills (Pebble under -race is
# slow); the matrix legs run it without -race (scripts/test-matrix.sh).
PEBBLEFS_TEST ?= -race -short -count=1 -timeout=10m
# examples/promdio is a module of its own too (Prometheus stays out of
# dio's go.mod): a few seconds of tests, named here as pebblefs is.
EXAMPLES = examples/promdio
# crashtest/ is a module of its own too (go-fuse stays out of dio's go.mod):
# the recording disk and the crash-state replay (docs/testing.md). Its tests
# need root, /dev/fuse and loop devices, and skip saying which is missing
# (with CI=true they fail instead). Not under -race: the default run mounts
# and checks over 20,000 crash states. DIO_CRASH_STATES=100000 for a long run.
CRASHTEST_TEST ?= -count=1 -timeout=30m

# The packages with allocation tests (TestXxxAllocs), run again without
# -race: only they, so that the step prints no "[no tests to run]".
ALLOCS_PKGS = $(sort $(dir $(shell grep -rl --include='*_test.go' --exclude-dir=pebblefs --exclude-dir=crashtest 'func Test[A-Za-z0-9_]*Allocs' .)))

.PHONY: build test test-crash test-matrix lint bench fuzz run clean

build:
	$(GO) build ./...
	$(GO) build -o bin/dio-check ./cmd/dio-check

test:
	$(GO) vet ./...
	$(GO) vet -tags dio_nostats ./direct/ ./scripts/_cpuio/   # the statistics compiled out, for measuring their cost (docs/observing.md)
	$(GO) test -race -count=1 -timeout=10m ./...
	$(if $(ALLOCS_PKGS),$(GO) test -count=1 -run 'Allocs' $(ALLOCS_PKGS))   # allocation counts, which -race distorts
	cd pebblefs && $(GO) vet ./... && $(GO) test $(PEBBLEFS_TEST) ./...
	for m in $(EXAMPLES); do (cd $$m && $(GO) vet ./... && $(GO) test -race -count=1 ./...) || exit 1; done
	$(MAKE) --no-print-directory test-crash
	@if [ "$$(id -u)" != 0 ]; then \
		echo "note: skipped the filesystem matrix (tmpfs, ramfs, ext4, xfs, btrfs): it mounts filesystems and needs root (try: sudo make test-matrix)"; \
		if [ "$$CI" = true ]; then echo "error: CI=true requires the matrix" >&2; exit 1; fi; \
	else \
		echo scripts/test-matrix.sh; scripts/test-matrix.sh; \
	fi

test-matrix:
	scripts/test-matrix.sh

test-crash:
	cd crashtest && $(GO) vet ./... && $(GO) test $(CRASHTEST_TEST) ./...

lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then \
		echo "gofmt -l: these files need gofmt -w:"; echo "$$out"; exit 1; \
	fi
	$(GO) vet ./...
	$(GO) vet -tags dio_nostats ./direct/ ./scripts/_cpuio/
	$(GO) test -count=1 -run '^TestLayers' .   # imports point down the layers (layers_test.go); also in make test
	$(GO) mod tidy -diff
	$(GO) run $(STATICCHECK) ./...
	cd pebblefs && $(GO) vet ./... && $(GO) mod tidy -diff && $(GO) run $(STATICCHECK) ./...
	for m in $(EXAMPLES); do (cd $$m && $(GO) vet ./... && $(GO) mod tidy -diff && $(GO) run $(STATICCHECK) ./...) || exit 1; done
	cd crashtest && $(GO) vet ./... && $(GO) mod tidy -diff && $(GO) run $(STATICCHECK) ./...
	GOOS=darwin $(GO) build ./...
	GOOS=windows $(GO) build ./...
	GOOS=freebsd $(GO) build ./...
	cd pebblefs && for os in darwin freebsd windows; do GOOS=$$os $(GO) vet ./... || exit 1; done

# fuzz runs each fuzz target, starting from the corpora in testdata/fuzz,
# for a count of inputs (about 25 s each here), not a duration: Go 1.26's
# coordinator can fail a run whose -fuzztime deadline races a worker
# still running an input, with "context deadline exceeded" and no
# crasher (golang/go#75804, fixed in Go 1.27), which a loaded CI machine
# hit. FUZZTIME=30s (or 1000x) sets both.
FUZZ_HEADER ?= 600000x
FUZZ_READER ?= 1000x
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeHeader$$' -fuzztime $(or $(FUZZTIME),$(FUZZ_HEADER)) ./blobio/
	$(GO) test -run '^$$' -fuzz '^FuzzReader$$' -fuzztime $(or $(FUZZTIME),$(FUZZ_READER)) ./blobio/

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# run probes DIR and benchmarks std-fs against direct I/O on it (about a
# minute with the defaults; BENCH="-size 32MiB" for a quicker look).
BENCH ?=
run: build
	bin/dio-check $(DIR)
	bin/dio-check bench $(if $(BENCH),$(BENCH) )$(DIR)

clean:
	rm -rf bin
	$(GO) clean ./...
