package main

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/cmd/dio-check/internal/ingest"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestBenchReadJSON runs the read section twice over a small file and
// checks that every row appears once per run with its keys, that a row
// that cannot run says why, and that nothing is left behind.
func TestBenchReadJSON(t *testing.T) {
	dir := testenv.Dir(t)
	out, stderr, code := dioCheck(t, "bench", "-json", "-workload", "read", "-size", "4MiB", "-duration", "30ms", "-runs", "2", dir)
	require.Equal(t, 0, code, stderr)
	runs := map[readRow][]int{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var keys map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &keys), sc.Text())
		for _, k := range []string{"workload", "reader", "readers", "engine", "reads_s", "mib_s", "value_size", "bytes", "run", "page_cache_bytes", "elapsed_ms", "cpu_us_per_op"} {
			assert.Contains(t, keys, k, sc.Text())
		}
		var r BenchResult
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		assert.Equal(t, ingest.Read, r.Workload)
		assert.Equal(t, int64(4<<20), r.Bytes)
		assert.Positive(t, r.ReadsS, sc.Text())
		assert.Positive(t, r.MiBs, sc.Text())
		assert.Positive(t, r.Reads, sc.Text())
		assert.Positive(t, r.CPUUsPerOp, "CPU per read: %s", sc.Text())
		row := readRow{r.Reader, r.Readers, r.Batch, r.Engine}
		runs[row] = append(runs[row], r.Run)
		switch {
		case r.Reader == fioReadReader && r.Engine == fioSpanEngine:
			// The mean aligned span of a 4,004-byte record: one or two
			// blocks of the file's alignment.
			assert.Greater(t, r.ValueSize, ingest.BlobSize, sc.Text())
			assert.LessOrEqual(t, r.ValueSize, 2*max(4096, testenv.Sector()), sc.Text())
			assert.Equal(t, int64(-1), r.PageCacheBytes, "fio's page cache is not measured")
		case r.Reader == fioReadReader:
			assert.Equal(t, fioReadBlock, r.ValueSize)
			assert.Equal(t, int64(-1), r.PageCacheBytes, "fio's page cache is not measured")
		case r.Engine == "std-fs" || r.Engine == cachedEngine:
			assert.Equal(t, ingest.BlobSize, r.ValueSize)
			if r.Engine == cachedEngine {
				assert.Positive(t, r.PageCacheBytes, "a cached row reads a cached file")
			}
		default:
			assert.Equal(t, ingest.BlobSize, r.ValueSize)
			switch testenv.FS() {
			case "tmpfs":
			case "btrfs":
				// btrfs may read part of a direct read through the page
				// cache (see ingest.ReadResult.PageCacheBytes); a read path
				// through the cache fills most of the file.
				assert.Less(t, r.PageCacheBytes, r.Bytes/4, "%s reads through no page cache", row.label())
			default:
				assert.Zero(t, r.PageCacheBytes, "%s reads no page cache", row.label())
			}
		}
	}
	for _, row := range readRows(haveFio()) {
		skipped := strings.Contains(stderr, "skipped "+row.skipKey()+":") || strings.Contains(stderr, "skipped "+row.reader+":")
		switch {
		case row.reader == ingest.ReadBlobs && !ingest.HasReadBlobs():
			assert.True(t, skipped, "ReadBlobs, not in this build, says it is skipped")
		case row.engine == "std-fs" || row.engine == cachedEngine:
			assert.False(t, skipped, "std-fs always runs: %s", stderr)
		case testenv.RejectsDirect():
			assert.True(t, skipped, "%s must be skipped, and say so, where O_DIRECT is refused", row.label())
		case row.engine == "direct+pwrite" || row.reader == ingest.Pread:
			assert.False(t, skipped, stderr)
		}
		if skipped {
			assert.Empty(t, runs[row], row.label())
		} else {
			assert.Equal(t, []int{1, 2}, runs[row], "%s: once per run, in order", row.label())
		}
	}
	testenv.RequireEmpty(t, dir)
}

// TestBenchReadTable checks the text output of the read section, after
// the ingest tables when both are asked for.
func TestBenchReadTable(t *testing.T) {
	dir := testenv.Dir(t)
	out, stderr, code := dioCheck(t, "bench", "-workload", "seq,read", "-size", "4MiB", "-buffers", "64KiB", "-duration", "20ms", dir)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "In Neon's layout", "the ingest tables come too")
	i := strings.Index(out, "random reads of 4000-byte blobs from a 4MiB blob file")
	require.Positive(t, i, out)
	assert.Greater(t, i, strings.Index(out, "In Neon's layout"), "the read table comes after the ingest tables")
	reads := out[i:]
	assert.Regexp(t, `reader +readers +engine +reads/s +MiB/s +× fio +× spans +× jobs +× pread +CPU µs/read +× fio CPU +page cache\n`, reads)
	assert.Regexp(t, `ReadBlob +16 +std-fs +\d+ +\d+\.\d `, reads)
	assert.Regexp(t, `ReadBlob +1 +std-fs\+cached +\d+ `, reads)
	// What std-fs's rows measure, said before them (issue 34: "32.77× fio"
	// right after a legend saying the page cache was dropped).
	legend := reads[:strings.Index(reads, "reader ")]
	assert.Contains(t, legend, "std-fs reads through the page cache, which keeps every block it reads")
	assert.Contains(t, legend, "set the page cache against the device")
	if !testenv.RejectsDirect() {
		assert.Regexp(t, `ReadBlob +16 +direct\+pwrite +\d+ +\d+\.\d +(\d+\.\d\d|-) +(\d+\.\d\d|-) +(\d+\.\d\d|-) +\d+\.\d\d +\d+\.\d +(\d+\.\d\d|-) +(0|\d+\.\dMiB)\n`, reads, "× pread beside pread's row; CPU per read")
		assert.Regexp(t, `pread +16 +O_DIRECT +\d+ +\d+\.\d +(\d+\.\d\d|-) +(\d+\.\d\d|-) +(\d+\.\d\d|-) +1\.00 +\d+\.\d +(\d+\.\d\d|-) +(0|\d+\.\dMiB)\n`, reads)
	}
	if haveFio() && !testenv.RejectsDirect() {
		for _, qd := range fioReadDepths {
			assert.Regexp(t, `fio randread +QD`+strconv.Itoa(qd)+` +fio io_uring +\d+ +\d+\.\d +1\.00 +\S+ +\S+ +\S+ +\d+\.\d +1\.00 `, reads, "fio's CPU, as our child's")
			assert.Regexp(t, `fio randread +QD`+strconv.Itoa(qd)+` +fio io_uring spans +\d+ +\d+\.\d +\d+\.\d\d +1\.00 `, reads)
		}
		// fio as 16 jobs at QD1, against fio QD16, its own × jobs 1.00,
		// and ReadBlob ×16 against it.
		assert.Regexp(t, `fio randread +16×QD1 +fio io_uring jobs +\d+ +\d+\.\d +\d+\.\d\d +\d+\.\d\d +1\.00 +\d+\.\d\d +\d+\.\d +\d+\.\d\d +- *\n`, reads)
		assert.Regexp(t, `ReadBlob +16 +direct\+pwrite +\d+ +\d+\.\d +\d+\.\d\d +\d+\.\d\d +\d+\.\d\d +\d+\.\d\d `, reads)
		assert.Contains(t, reads, "× jobs: against fio as 16 jobs at QD1")
		assert.Regexp(t, `× spans: against fio reading what the Reader reads, each blob's aligned span \(--bssplit=\d+/\d+(:\d+/\d+)* --blockalign=\d+, mean \d+ bytes\)`, reads)
	}
	if !ingest.HasReadBlobs() {
		assert.NotContains(t, reads, "ReadBlobs(64) ")
		assert.Contains(t, stderr, "skipped ReadBlobs:")
	}
	testenv.RequireEmpty(t, dir)
}

// TestInterruptDuringRead stops the read section while it writes its blob
// file and while it reads it: nothing is left in the directory.
func TestInterruptDuringRead(t *testing.T) {
	for _, settle := range []time.Duration{0, 300 * time.Millisecond} {
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
			dir := testenv.Dir(t)
			interruptBench(t, dir, sig, ".dio-check-read-", 30*time.Second, settle,
				"-workload", "read", "-size", "32MiB", "-duration", "100ms", "-runs", "100")
		}
	}
}

// TestInterruptDuringFioRead stops the bench with SIGINT while fio reads
// the blob file: fio is killed and the file removed.
func TestInterruptDuringFioRead(t *testing.T) {
	if !haveFio() || testenv.RejectsDirect() {
		t.Skip("needs fio and O_DIRECT")
	}
	dir := testenv.Dir(t)
	fioRunning := func() bool {
		out, _ := exec.Command("pgrep", "-f", "fio.*"+dir).Output()
		return len(strings.TrimSpace(string(out))) > 0
	}
	interruptBenchWhen(t, dir, syscall.SIGINT, fioRunning, "fio read the blob file", 60*time.Second, 20*time.Millisecond,
		"-workload", "read", "-size", "16MiB", "-duration", "300ms", "-runs", "100")
	assert.False(t, fioRunning(), "fio outlived the bench")
}

// TestFioSpans checks the request mix given to fio: whole percentages
// that add up to 100, a share under 1% left out, the remainder on the
// largest (the smallest size of a tie), and the mean request size.
func TestFioSpans(t *testing.T) {
	for _, tc := range []struct {
		sizes map[int64]int
		align int64
		want  []string
		mean  int
	}{
		{map[int64]int{4096: 24, 4608: 104}, 512, []string{"--bssplit=4096/19:4608/81", "--blockalign=512"}, 4512},
		{map[int64]int{4096: 1, 8192: 999}, 4096, []string{"--bssplit=8192/100", "--blockalign=4096"}, 8187},
		{map[int64]int{4096: 1, 4608: 1, 5120: 1}, 512, []string{"--bssplit=4096/34:4608/33:5120/33", "--blockalign=512"}, 4608},
		{map[int64]int{}, 512, []string{"--bs=4096"}, fioReadBlock},
	} {
		args, mean := fioSpans(tc.sizes, tc.align)
		assert.Equal(t, tc.want, args, "%v", tc.sizes)
		assert.Equal(t, tc.mean, mean, "%v", tc.sizes)
	}
}
