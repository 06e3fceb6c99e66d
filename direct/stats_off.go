//go:build dio_nostats

package direct

// recording is off in a build with -tags dio_nostats: the I/O path
// reads no clock and counts nothing (no operations, bytes, latencies,
// Asked or engine counts, no slow-I/O watch), so that
// scripts/cpu-per-io.sh can time the same reads with and without the
// statistics (NOSTATS=1). It exists to measure their cost, nothing
// else: Stats and every Meter then read zero, and the tests fail.
const recording = false
