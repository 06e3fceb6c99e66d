//go:build !dio_nostats

package direct

// recording says whether the I/O path records its statistics. It is
// always on; building with -tags dio_nostats turns it off (see
// stats_off.go), for measuring what the statistics cost.
const recording = true
