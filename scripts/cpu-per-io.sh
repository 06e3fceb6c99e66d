#!/usr/bin/env bash
# cpu-per-io.sh DIR [ROUNDS] [REV...]: what an I/O costs in CPU, dio's
# against fio's, measured by scripts/_cpuio: reads/s and CPU µs per read
# (the whole process's rusage, fio's as our child's) for direct.Queue,
# ReadBlob and fileio's ReadAt (readat) from 16 goroutines, ReadBlobs in batches of 64, one goroutine
# (ReadBlob, pread, fio QD1), 64 KiB appends, and fio on the same 256 MiB
# file at QD16 and as 16 jobs at QD1 (the shape of 16 goroutines with one
# read each), and fio's own shape on a direct.Queue: one goroutine keeping
# 16 reads in flight (queuedepth; queuedepth1 resubmits each read alone,
# not batched: add it with MODES). Each REV (a git revision) is built too, beside the work
# tree, and every round runs every mode on every build in turn, so that
# drift on a shared machine hits them alike; the medians come last.
# NOSTATS=1 adds the tree built with -tags dio_nostats (the statistics
# compiled out, direct/stats_off.go): the summary's last column is then
# what they cost, CPU per read with them over without, round by round;
# giving the tree's own revision as a REV beside it measures the noise
# of such a ratio on this machine (the same code twice).
#
# On a machine shared with other work each run first waits (up to
# SETTLE seconds, default 30; 0 skips it) for half a second in which the
# CPUs are at least 85% idle, so that a burst of someone's compiling
# does not land in one build's run and not the other's.
#
# The fast device of docs/engine.md (ext4 on a loop device over a tmpfs
# file, direct I/O on) is where the CPU, not a disk, sets the pace.
set -euo pipefail
dir=${1:?usage: cpu-per-io.sh DIR [ROUNDS] [REV...]}
rounds=${2:-3}
shift $(( $# < 2 ? $# : 2 ))
modes=${MODES:-fio fiojobs queue queuedepth readblob readat readblobs pread1 readblob1 fio1 append fioappend}
command -v fio >/dev/null || { echo "cpu-per-io.sh: fio not found (apt-get install fio)" >&2; exit 2; }
cd "$(dirname "$0")/.."
work=$(mktemp -d "$dir/dio-cpu.XXXXXX")
bin=$(mktemp -d)
trap 'rm -rf "$work" "$bin"' EXIT

go build -o "$bin/tree" ./scripts/_cpuio
builds=("$bin/tree")
if [[ -n ${NOSTATS:-} ]]; then
	go build -tags dio_nostats -o "$bin/nostats" ./scripts/_cpuio
	builds+=("$bin/nostats")
fi
for rev in "$@"; do
	name=$(git rev-parse --short "$rev")
	mkdir -p "$bin/src-$name"
	git archive "$rev" | tar -x -C "$bin/src-$name"
	mkdir -p "$bin/src-$name/scripts/_cpuio"
	cp scripts/_cpuio/*.go "$bin/src-$name/scripts/_cpuio/"
	(cd "$bin/src-$name" && go build -o "$bin/$name" ./scripts/_cpuio)
	builds+=("$bin/$name")
done

# settle waits for the CPUs to be quiet (see above), giving up silently.
settle() {
	local a b tot idle k
	for ((k = 0; k < ${SETTLE:-30} * 2; k++)); do
		read -ra a < /proc/stat
		sleep 0.5
		read -ra b < /proc/stat
		tot=0
		for i in 1 2 3 4 5 6 7 8; do tot=$((tot + b[i] - a[i])); done
		idle=$((b[4] - a[4] + b[5] - a[5]))
		((tot > 0 && idle * 100 >= tot * 85)) && return 0
	done
	return 0
}

"$bin/tree" -mode setup -f "$work/blobs"
# The builds take turns at going first: the first run of a mode in a
# round pays for what the previous mode left (the append file's blocks
# freed on the loop device, say), and a fixed order put that on the work
# tree every round (64 KiB appends measured 1.36x the CPU going first
# and 0.76x going second, the same two builds).
for r in $(seq 1 "$rounds"); do
	k=$(( (r - 1) % ${#builds[@]} ))
	order=("${builds[@]:k}" "${builds[@]:0:k}")
	for m in $modes; do
		for b in "${order[@]}"; do
			f=$work/blobs
			[[ $m == *append ]] && f=$work/append
			settle
			"$b" -mode "$m" -f "$f" -tag "$(basename "$b")" -d "${DURATION:-2s}" | sed "s/\$/\t$r/"
		done
	done
done | tee "$bin/results" >&2
"$bin/tree" -summarize <"$bin/results"
