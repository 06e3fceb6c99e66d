#!/usr/bin/env bash
# shellcheck disable=SC2317 # cleanup and on_signal run from traps
# test-matrix.sh runs the Go test suite once per filesystem leg.
#
#   scripts/test-matrix.sh [go test args...]     (default: -race -count=1 -timeout=5m ./...)
#
# Legs: tmpfs, ramfs (refuses O_DIRECT), ext4 on a 512-byte-sector loop
# device, xfs on a 4096-byte-sector loop device, btrfs on a loop device.
# Each leg runs `go test` with DIO_TEST_DIR (the mountpoint), DIO_TEST_FS and
# DIO_TEST_SECTOR set; see internal/testenv.
#
# Environment:
#   MATRIX_LEGS="tmpfs ramfs"  run only these legs (default: all five)
#   MATRIX_STRICT=1            a skipped leg fails the run (CI sets this)
#   MATRIX_PEBBLEFS=0|1        also test the nested module pebblefs/ on each
#                              leg (default: 1 when no go test args are given)
#   PEBBLEFS_TEST_ARGS="..."   its go test args (default: -count=1 -timeout=10m ./...;
#                              no -race: Pebble under -race is slow, make test runs it)
#
# Needs root: every leg mounts something. Images and mountpoints live under
# one `mktemp -d` root; a trap unmounts, detaches and removes all of it on
# exit, failure or interruption. GOCACHE and TMPDIR are left alone, so the
# build cache never lands on a test mount.
set -euo pipefail

ALL_LEGS="tmpfs ramfs ext4 xfs btrfs"
IMAGE_SIZE=1G # sparse; xfs needs >= 300 MiB, btrfs >= ~120 MiB
# btrfs gets more room: the suite writes and deletes some 250 MiB within
# one transaction, and space freed in a transaction stays pinned until it
# commits. On a 1 GiB image that once left no room for a metadata chunk
# (all 51 MiB of metadata pinned), and btrfs aborted the transaction with
# ENOSPC and went read-only mid-suite.
BTRFS_IMAGE_SIZE=4G
PATH="$PATH:/usr/sbin:/sbin"

cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then
	set -- -race -count=1 -timeout=5m ./...
	: "${MATRIX_PEBBLEFS:=1}"
fi
read -r -a PEBBLEFS_ARGS <<<"${PEBBLEFS_TEST_ARGS:--count=1 -timeout=10m ./...}"

read -r -a LEGS <<<"${MATRIX_LEGS:-$ALL_LEGS}"
for leg in "${LEGS[@]}"; do
	case " $ALL_LEGS " in
	*" $leg "*) ;;
	*)
		echo "matrix: unknown leg '$leg' in MATRIX_LEGS (legs: $ALL_LEGS)" >&2
		exit 2
		;;
	esac
done

label() {
	case $1 in
	ramfs) echo "ramfs (rejects O_DIRECT)" ;;
	ext4) echo "ext4 (512-byte sectors)" ;;
	xfs) echo "xfs (4096-byte sectors)" ;;
	*) echo "$1" ;;
	esac
}

sector() { # logical sector size of the leg's loop device; empty if none
	case $1 in
	ext4) echo 512 ;;
	xfs) echo 4096 ;;
	*) echo "" ;;
	esac
}

# skip_reason prints why a leg cannot run here, or nothing.
skip_reason() {
	if [ "$(id -u)" != 0 ]; then
		echo "not root (mounting $1 needs root; run with sudo)"
		return
	fi
	local tools=""
	case $1 in
	ext4) tools="losetup mkfs.ext4" ;;
	xfs) tools="losetup mkfs.xfs" ;;
	btrfs) tools="losetup mkfs.btrfs" ;;
	esac
	local path
	for t in $tools; do
		# command -v also names a file it found that cannot run (bash falls
		# back to one), so check that it can.
		if ! path=$(command -v "$t") || [ ! -x "$path" ]; then
			case $t in
			mkfs.xfs) echo "mkfs.xfs not found (install xfsprogs)" ;;
			mkfs.btrfs) echo "mkfs.btrfs not found (install btrfs-progs)" ;;
			mkfs.ext4) echo "mkfs.ext4 not found (install e2fsprogs)" ;;
			*) echo "$t not found" ;;
			esac
			return
		fi
	done
	if [ -n "$tools" ] && [ ! -e /dev/loop-control ]; then
		echo "no loop device support (/dev/loop-control missing; try modprobe loop)"
	fi
}

ROOT=""     # temp root holding every image and mountpoint
TEST_PID="" # the running `go test`, leader of its own process group
SUMMARY=()
FAILED=0

# mounts_under prints the mountpoints at or below $1, newest first.
mounts_under() {
	local prefix=$1 target
	[ -r /proc/self/mountinfo ] || return 0
	awk '{ print $5 }' /proc/self/mountinfo | tac | while read -r target; do
		target=$(printf '%b' "$target") # undo \040-style escapes
		case $target in
		"$prefix" | "$prefix"/*) echo "$target" ;;
		esac
	done
}

unmount() {
	local m=$1
	for _ in 1 2 3 4 5; do
		umount "$m" 2>/dev/null && return 0
		sleep 1
	done
	echo "matrix: $m still busy, detaching it lazily (umount -l)" >&2
	umount -l "$m"
}

# teardown unmounts everything below dir, detaches the loop devices backed
# by its images and removes it. Safe to call repeatedly.
teardown() {
	local dir=$1 m img dev ok=0
	[ -n "$dir" ] && [ -d "$dir" ] || return 0
	while read -r m; do
		[ -n "$m" ] || continue
		unmount "$m" || ok=1
	done < <(mounts_under "$dir")
	while read -r img; do
		for dev in $(losetup -n -O NAME -j "$img" 2>/dev/null); do
			losetup -d "$dev" || ok=1
			if [ -n "$(losetup -n -O NAME -j "$img" 2>/dev/null)" ]; then
				echo "matrix: $dev is still in use; the kernel detaches it when released" >&2
			fi
		done
	done < <(find "$dir" -xdev -name '*.img' -type f 2>/dev/null)
	if [ -n "$(mounts_under "$dir")" ]; then
		echo "matrix: leaving $dir in place: something is still mounted below it" >&2
		return 1
	fi
	rm -rf --one-file-system "$dir" || ok=1
	return $ok
}

stop_tests() {
	[ -n "$TEST_PID" ] || return 0
	if kill -0 "$TEST_PID" 2>/dev/null; then
		echo "matrix: stopping go test (process group $TEST_PID)" >&2
		kill -TERM -- "-$TEST_PID" 2>/dev/null || true
		for _ in $(seq 50); do
			kill -0 -- "-$TEST_PID" 2>/dev/null || break
			sleep 0.2
		done
		kill -KILL -- "-$TEST_PID" 2>/dev/null || true
	fi
	wait "$TEST_PID" 2>/dev/null || true
	TEST_PID=""
}

print_summary() {
	[ ${#SUMMARY[@]} -gt 0 ] || return 0
	echo
	printf '%s\n' "${SUMMARY[@]}"
}

cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM HUP
	stop_tests
	if [ -n "$ROOT" ]; then
		teardown "$ROOT" || {
			echo "matrix: cleanup incomplete, see $ROOT" >&2
			[ "$rc" != 0 ] || rc=1
		}
	fi
	print_summary
	exit "$rc"
}

on_signal() {
	echo >&2
	echo "matrix: interrupted by SIG$1, cleaning up" >&2
	SUMMARY+=("matrix: interrupted by SIG$1")
	case $1 in
	INT) (exit 130) ;;
	TERM) (exit 143) ;;
	HUP) (exit 129) ;;
	esac
	cleanup
}

trap cleanup EXIT
trap 'on_signal INT' INT
trap 'on_signal TERM' TERM
trap 'on_signal HUP' HUP

ROOT=$(mktemp -d -t dio-matrix.XXXXXX)

# setup mounts the leg's filesystem at $ROOT/<leg>/mnt.
setup() {
	local leg=$1 dir=$ROOT/$1 ss dev got
	ss=$(sector "$leg")
	mkdir -p "$dir/mnt" || return 1
	case $leg in
	tmpfs)
		mount -t tmpfs -o size="$IMAGE_SIZE",mode=0755 dio-matrix-tmpfs "$dir/mnt" || return 1
		return 0
		;;
	ramfs) # no size limit: ramfs has none
		mount -t ramfs -o mode=0755 dio-matrix-ramfs "$dir/mnt" || return 1
		return 0
		;;
	esac
	local size=$IMAGE_SIZE
	if [ "$leg" = btrfs ]; then size=$BTRFS_IMAGE_SIZE; fi
	truncate -s "$size" "$dir/$leg.img" || return 1
	dev=$(losetup --find --show --sector-size "${ss:-512}" "$dir/$leg.img") || return 1
	got=$(blockdev --getss "$dev") || return 1
	if [ -n "$ss" ] && [ "$got" != "$ss" ]; then
		echo "matrix: $dev has $got-byte sectors, wanted $ss" >&2
		return 1
	fi
	echo "matrix: $dev ($got-byte sectors) backed by $dir/$leg.img"
	local -a mkfs
	case $leg in
	ext4) mkfs=(mkfs.ext4 -q -F "$dev") ;;
	xfs) mkfs=(mkfs.xfs -q -f -s size=4096 "$dev") ;;
	btrfs) mkfs=(mkfs.btrfs -q -f "$dev") ;;
	esac
	local out
	if ! out=$("${mkfs[@]}" 2>&1); then # quiet unless it fails
		echo "matrix: ${mkfs[*]} failed:" >&2
		echo "$out" >&2
		return 1
	fi
	mount -t "$leg" "$dev" "$dir/mnt" || return 1
}

# run_tests runs go test in its own process group, so an interruption can
# stop the test binaries too before their mount is pulled away.
run_tests() {
	local leg=$1 ss rc=0
	shift
	ss=$(sector "$leg")
	local -a env=(DIO_TEST_DIR="$ROOT/$leg/mnt" DIO_TEST_FS="$leg")
	if [ -n "$ss" ]; then
		env+=(DIO_TEST_SECTOR="$ss")
	fi
	# A background child of a non-interactive shell is not a process group
	# leader, so setsid makes this very process the leader of a new group.
	env -u DIO_TEST_SECTOR "${env[@]}" setsid go test "$@" &
	TEST_PID=$!
	wait "$TEST_PID" || rc=$?
	TEST_PID=""
	if [ "${MATRIX_PEBBLEFS:-0}" = 1 ] && [ -f pebblefs/go.mod ]; then
		echo "matrix: (cd pebblefs && go test ${PEBBLEFS_ARGS[*]})"
		(cd pebblefs && exec env -u DIO_TEST_SECTOR "${env[@]}" setsid go test "${PEBBLEFS_ARGS[@]}") &
		TEST_PID=$!
		wait "$TEST_PID" || rc=$?
		TEST_PID=""
	fi
	return $rc
}

record() {
	SUMMARY+=("$(printf 'matrix: %-26s %s' "$(label "$1")" "$2")")
}

for leg in "${LEGS[@]}"; do
	reason=$(skip_reason "$leg")
	if [ -n "$reason" ]; then
		echo "=== matrix leg: $(label "$leg"): skipped: $reason ==="
		record "$leg" "SKIP: $reason"
		if [ "${MATRIX_STRICT:-}" = 1 ]; then
			SUMMARY+=("matrix: MATRIX_STRICT=1: the skipped $leg leg fails the run")
			FAILED=1
		fi
		continue
	fi
	echo
	echo "=== matrix leg: $(label "$leg") ==="
	start=$SECONDS
	if ! setup "$leg"; then
		record "$leg" "FAIL: could not set up the $leg mount  ($((SECONDS - start))s)"
		FAILED=1
	else
		ss=$(sector "$leg")
		echo "matrix: DIO_TEST_DIR=$ROOT/$leg/mnt DIO_TEST_FS=$leg ${ss:+DIO_TEST_SECTOR=$ss }go test $*"
		if run_tests "$leg" "$@"; then
			record "$leg" "PASS  ($((SECONDS - start))s)"
		else
			record "$leg" "FAIL  ($((SECONDS - start))s)"
			FAILED=1
		fi
	fi
	if ! teardown "$ROOT/$leg"; then
		SUMMARY+=("matrix: $leg: teardown failed")
		FAILED=1
	fi
done

exit $FAILED
