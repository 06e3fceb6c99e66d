#!/usr/bin/env bash
# stats-share.sh DIR [ROUNDS]: the share of a read's CPU that dio's
# statistics take (direct.Stats, the Meters), from perf profiles of
# scripts/_cpuio's read modes on a file in DIR: every sample of the
# process (kernel included) whose stack passes through direct/stats_*.go,
# inlined code included (scripts/_statshare). A share of one run's
# samples, so it needs no second build to compare against and is
# untouched by the drift between runs that paired timings suffer on a
# shared machine; its error is the sampling's (about ±10% of the share
# with the ~100 samples a 4 s run finds there). MODES picks the modes
# (default: queue readblob readat readblobs); DURATION each run's length.
set -euo pipefail
dir=${1:?usage: stats-share.sh DIR [ROUNDS]}
rounds=${2:-2}
command -v perf >/dev/null || { echo "stats-share.sh: perf not found (apt-get install linux-perf)" >&2; exit 2; }
cd "$(dirname "$0")/.."
work=$(mktemp -d "$dir/dio-share.XXXXXX")
bin=$(mktemp -d)
trap 'rm -rf "$work" "$bin"' EXIT
go build -o "$bin/cpuio" ./scripts/_cpuio
go build -o "$bin/statshare" ./scripts/_statshare
"$bin/cpuio" -mode setup -f "$work/blobs" >/dev/null
for r in $(seq 1 "$rounds"); do
	for m in ${MODES:-queue readblob readat readblobs}; do
		perf record -q -e cpu-clock -F 1999 -g -o "$bin/perf.data" -- \
			"$bin/cpuio" -mode "$m" -f "$work/blobs" -d "${DURATION:-4s}" >/dev/null
		printf '%s, round %d: ' "$m" "$r"
		perf script -i "$bin/perf.data" 2>/dev/null | "$bin/statshare" -bin "$bin/cpuio" -top "${TOP:-0}"
	done
done
