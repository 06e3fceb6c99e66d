#!/usr/bin/env bash
# compare-fio.sh DIR [ROUNDS]: sequential 64 KiB O_DIRECT writes on DIR,
# fio's io_uring engine against dio's queue (BenchmarkQueue), interleaved
# round by round so that drift on a shared machine hits both alike. Each
# side writes 256 MiB into a file preallocated the same way (fio's default
# --fallocate=native; BenchmarkQueue fallocates its region).
set -euo pipefail
dir=${1:?usage: compare-fio.sh DIR [ROUNDS]}
rounds=${2:-3}
command -v fio >/dev/null || { echo "compare-fio.sh: fio not found (apt-get install fio)" >&2; exit 2; }
cd "$(dirname "$0")/.."
work=$(mktemp -d "$dir/dio-fio.XXXXXX")
bin=$(mktemp -d)
trap 'rm -rf "$work" "$bin"' EXIT
go test -c -o "$bin/direct.test" ./direct/

fio_mbs() { # fio_mbs QD: MB/s of one fio run
	rm -f "$work"/*
	fio --name=w --directory="$work" --ioengine=io_uring --direct=1 --rw=write \
		--bs=64k --iodepth="$1" --size=256M --fallocate=native --output-format=json |
		python3 -c 'import json,sys; print("%.0f" % (json.load(sys.stdin)["jobs"][0]["write"]["bw_bytes"]/1e6))'
	rm -f "$work"/*
}
dio_mbs() { # dio_mbs ENGINE QD: MB/s of BenchmarkQueue, 4096 writes = 256 MiB
	DIO_TEST_DIR="$work" "$bin/direct.test" -test.run '^$' \
		-test.bench "^BenchmarkQueue\$/^engine=$1\$/^qd=$2\$/^bs=64KiB\$" -test.benchtime 4096x |
		awk '/MB\/s/ { for (i = 1; i <= NF; i++) if ($i == "MB/s") print int($(i-1)) }'
}
printf '%-6s %12s %14s %14s %12s %12s\n' round fio-qd4 io_uring-qd4 pwrite-qd1 "dio/fio" "qd4/pwrite1"
for r in $(seq 1 "$rounds"); do
	f=$(fio_mbs 4); u=$(dio_mbs io_uring 4); p=$(dio_mbs pwrite 1)
	awk -v r="$r" -v f="$f" -v u="$u" -v p="$p" 'BEGIN { printf "%-6s %12s %14s %14s %12.2f %12.2f\n", r, f, u, p, u/f, u/p }'
done
