package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/internal/benchkit"
)

func TestCCDF(t *testing.T) {
	var h benchkit.Histogram
	for range 90 {
		h.Record(time.Microsecond)
	}
	for range 10 {
		h.Record(time.Millisecond)
	}
	xys := ccdf(h.Points())
	require.Len(t, xys, 1, "the last point (nothing slower) has no place on a log axis")
	assert.InDelta(t, 1.0, xys[0].X, 0.07)
	assert.InDelta(t, 0.1, xys[0].Y, 1e-9)
}

func TestParseEngines(t *testing.T) {
	all, err := parseEngines("all")
	require.NoError(t, err)
	assert.Equal(t, []string{"cpu", "std-fs", "std-fs+dontcache", "direct+pwrite", "direct+io_uring"}, all, "the cpu reference first, then the engines")
	got, err := parseEngines("direct+io_uring, std-fs")
	require.NoError(t, err)
	assert.Equal(t, []string{"direct+io_uring", "std-fs"}, got, "the order given is the order run")
	for _, bad := range []string{"", "std-fs,", "std-fs+fsync", "alone", "std-fs,std-fs", "STD-FS"} {
		_, err := parseEngines(bad)
		assert.Error(t, err, "%q", bad)
	}
}

func TestParsePressure(t *testing.T) {
	dir := t.TempDir()
	c, err := parsePressure([]string{dir}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, pressureConfig{memory: 1 << 30, hot: 600 << 20, seconds: 10, rounds: 1, engines: []string{"cpu", "std-fs", "std-fs+dontcache", "direct+pwrite", "direct+io_uring"}, enginesFlag: "all", dir: dir,
		writers: 1, shape: shapeAppend, lead: 3}, c)

	c, err = parsePressure([]string{"-json", "-memory", "256MiB", "-hot", "64MiB", "-seconds", "1", "-rounds", "3", "-engines", "std-fs", "-plot", "p.svg",
		"-throttle", "200MiB/s", "-writers", "3", "-shape", "compact", "-lead", "0", dir}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, pressureConfig{json: true, memory: 256 << 20, hot: 64 << 20, seconds: 1, rounds: 3, engines: []string{"std-fs"}, enginesFlag: "std-fs", plot: "p.svg", dir: dir,
		throttle: 200 << 20, writers: 3, shape: shapeCompact}, c)
	c, err = parsePressure([]string{"-throttle", "1GiB", dir}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.EqualValues(t, 1<<30, c.throttle, "the /s is optional")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "exactly one directory"},
		{[]string{dir, dir}, "exactly one directory"},
		{[]string{"-memory", "lots", dir}, "-memory"},
		{[]string{"-memory", "32MiB", "-hot", "4KiB", dir}, "at least 64MiB"},
		{[]string{"-hot", "0", dir}, "-hot"},
		{[]string{"-hot", "1000", dir}, "multiple of 4KiB"},
		{[]string{"-hot", "1GiB", dir}, "below -memory"},
		{[]string{"-seconds", "0", dir}, "-seconds"},
		{[]string{"-rounds", "0", dir}, "-rounds"},
		{[]string{"-engines", "std-fs,bogus", dir}, `unknown engine "bogus"`},
		{[]string{"-plot", "p.jpg", dir}, ".png or .svg"},
		{[]string{"-throttle", "0", dir}, "positive"},
		{[]string{"-throttle", "fast", dir}, "-throttle"},
		{[]string{"-writers", "0", dir}, "-writers"},
		{[]string{"-shape", "zigzag", dir}, `-shape "zigzag"`},
		{[]string{"-lead", "-1", dir}, "-lead"},
		{[]string{"-bogus", dir}, "bogus"},
	} {
		_, err := parsePressure(tc.args, &bytes.Buffer{})
		var ue usageError
		require.ErrorAs(t, err, &ue, "%q", tc.args)
		assert.Contains(t, err.Error(), tc.want, "%q", tc.args)
	}
}

func TestPressureUsageErrors(t *testing.T) {
	// Exit 2 with a one-line reason, before any cgroup is made.
	_, stderr, code := dioCheck(t, "pressure", "-engines", "nope", t.TempDir())
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "unknown engine")
	_, stderr, code = dioCheck(t, "pressure", "/nonexistent/dir")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "no such file")
}

func TestPrintPressure(t *testing.T) {
	rows := []PressureRow{
		{Engine: alone, CotenantReadsS: 800000, CotenantP50Us: 1, CotenantP99Us: 3.5, CotenantP999Us: 10, MemoryPeakBytes: 619 << 20},
		{Engine: busyCPU, CotenantReadsS: 680000, CotenantP50Us: 1.2, CotenantP99Us: 3.5, CotenantP999Us: 12, MemoryPeakBytes: 619 << 20, CPUStealPct: 0.6},
		{Engine: "std-fs", IngestMiBs: 700, WriteP99Us: 100, WriteMaxUs: 41000, DeviceWriteP99Us: 900, SyncP99Us: 2500, WriteAmp: 1.02, CotenantReadsS: 2500, CotenantP50Us: 300, CotenantP99Us: 4000, CotenantP999Us: 57000, MemoryPeakBytes: 1 << 30, CPUStealPct: 23.4},
	}
	var out bytes.Buffer
	printPressure(&out, pressureConfig{memory: 1 << 30, hot: 600 << 20, seconds: 10, dir: t.TempDir()}, 1, rows, []rowDetail{{CotenantMaxUs: 50, HotCached: 1}, {CotenantMaxUs: 60, HotCached: 1}, {CotenantMaxUs: 90000, HotCached: 0.031}})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 7, out.String())
	assert.Regexp(t, `alone +- +- +- +- +- +- +800,000 +1.00 +1.0µs +3.5µs +1.00 +10µs +50µs +619MiB +100% +0%`, lines[4])
	assert.Regexp(t, `cpu +- +- +- +- +- +- +680,000 +0.85 +1.2µs +3.5µs +1.00 +12µs +60µs +619MiB +100% +1%`, lines[5], "the cpu reference ingests nothing")
	assert.Regexp(t, `std-fs +700 +100µs +41ms +900µs +2.5ms +1.02 +2,500 +0.003 +300µs +4.0ms +1143 +57ms +90ms +1GiB +3% +23%`, lines[6])

	// The ingest's shape, and the throttled device, in the header.
	out.Reset()
	printPressure(&out, pressureConfig{memory: 1 << 30, hot: 600 << 20, seconds: 10, dir: "/tmp", shape: shapeAppend, writers: 1, lead: 3,
		device: "a 8.6GiB ext4 on /dev/loop3 (7:3) over img, writes throttled to 200MiB/s"}, 1, rows[:1], []rowDetail{{}})
	assert.Contains(t, out.String(), "(append, 1 writer, started 3 s ahead), 10 s each, on a 8.6GiB ext4 on /dev/loop3 (7:3) over img, writes throttled to 200MiB/s, in /tmp (")
}

func TestPlotPressure(t *testing.T) {
	var fast, slow benchkit.Histogram
	for i := range 10000 {
		fast.Record(time.Duration(1000+i%100) * time.Nanosecond)
		slow.Record(time.Duration(1000+i*i) * time.Nanosecond)
	}
	rows := []PressureRow{{Engine: alone, CotenantP99Us: 1.1}, {Engine: "std-fs", CotenantP99Us: 4000}}
	details := []rowDetail{{Hist: fast.Points()}, {Hist: slow.Points()}}
	for _, ext := range []string{".png", ".svg"} {
		path := t.TempDir() + "/p" + ext
		require.NoError(t, plotPressure(pressureConfig{memory: 1 << 30, hot: 600 << 20, plot: path}, rows, details))
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		if ext == ".png" {
			assert.True(t, bytes.HasPrefix(data, []byte("\x89PNG")), "not a PNG")
		} else {
			assert.Contains(t, string(data), "<svg")
			assert.Contains(t, string(data), "std-fs: p99 4.0ms")
		}
	}
	ticks := fractionTicks{}.Ticks(1e-6, 1)
	require.NotEmpty(t, ticks)
	assert.Equal(t, "100%", ticks[0].Label)
	assert.Equal(t, "0.0001%", ticks[6].Label)
}

func TestMedians(t *testing.T) {
	hist := func(us ...int) []benchkit.HistPoint {
		var h benchkit.Histogram
		for _, u := range us {
			h.Record(time.Duration(u) * time.Microsecond)
		}
		return h.Points()
	}
	// Two engines over three rounds, interleaved as the child runs them.
	rows := []PressureRow{
		{Engine: alone, CotenantReadsS: 300, CotenantP99Us: 3},
		{Engine: "std-fs", CotenantReadsS: 10, CotenantP99Us: 900, IngestMiBs: 700, MemoryPeakBytes: 1 << 30},
		{Engine: alone, CotenantReadsS: 100, CotenantP99Us: 9},
		{Engine: "std-fs", CotenantReadsS: 30, CotenantP99Us: 100, IngestMiBs: 500, MemoryPeakBytes: 1 << 29},
		{Engine: alone, CotenantReadsS: 200, CotenantP99Us: 6},
		{Engine: "std-fs", CotenantReadsS: 20, CotenantP99Us: 500, IngestMiBs: 600, MemoryPeakBytes: 1 << 28},
	}
	details := []rowDetail{
		{CotenantMaxUs: 5, HotCached: 1, Hist: hist(1, 2)},
		{CotenantMaxUs: 9000, HotCached: 0.5, Hist: hist(3), Mode: "std-fs"},
		{CotenantMaxUs: 7, HotCached: 1, Hist: hist(1)},
		{CotenantMaxUs: 100, HotCached: 0.02, Hist: hist(4)},
		{CotenantMaxUs: 6, HotCached: 0.9, Hist: hist(2)},
		{CotenantMaxUs: 200, HotCached: 1, Hist: hist(5)},
	}
	got, gotDetails := medians(rows, details)
	require.Len(t, got, 2)
	assert.Equal(t, PressureRow{Engine: alone, CotenantReadsS: 200, CotenantP99Us: 6}, got[0])
	assert.Equal(t, PressureRow{Engine: "std-fs", CotenantReadsS: 20, CotenantP99Us: 500, IngestMiBs: 600, MemoryPeakBytes: 1 << 29}, got[1])
	assert.Equal(t, 7.0, gotDetails[0].CotenantMaxUs, "the worst read of any round")
	assert.Equal(t, 0.9, gotDetails[0].HotCached, "the least cached of any round")
	assert.Equal(t, 0.02, gotDetails[1].HotCached)
	assert.Equal(t, "std-fs", gotDetails[1].Mode)
	assert.EqualValues(t, 4, benchkit.FromPoints(gotDetails[0].Hist).Count(), "every round's reads in the distribution")
	assert.EqualValues(t, 3, benchkit.FromPoints(gotDetails[1].Hist).Count())

	// One round: the rows as they were.
	one, _ := medians(rows[:2], details[:2])
	assert.Equal(t, rows[:2], one)
}

func TestRollSize(t *testing.T) {
	assert.Equal(t, int64(rollBytes), rollSize(100<<30), "a large disk rolls at rollBytes")
	assert.Equal(t, int64(256<<20), rollSize(1<<30), "a 1 GiB filesystem at a quarter")
	assert.Equal(t, int64(minRoll), rollSize(0))
}

func TestReadChild(t *testing.T) {
	// What the measuring process prints over two rounds in which one
	// engine cannot run and the kernel cannot reset memory.peak.
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	note := "cgroup: memory.peak cannot be reset before Linux 6.12; the peak is the cgroup's since it was made"
	for round := 1; round <= 2; round++ {
		label := fmt.Sprintf("round %d/2: ", round)
		enc.Encode(pressureMsg{Phase: label + alone, Step: "warming the hot file"})
		enc.Encode(pressureMsg{Note: note})
		enc.Encode(pressureMsg{Phase: label + alone, Step: "measuring"})
		enc.Encode(pressureMsg{Phase: label + alone, Step: "measuring", Elapsed: 1})
		enc.Encode(pressureMsg{Row: &PressureRow{Engine: alone, CotenantReadsS: float64(round)}, Detail: &rowDetail{Mode: "-"}})
		enc.Encode(pressureMsg{Skip: "std-fs+dontcache", Why: "got std-fs: RWF_DONTCACHE: operation not supported"})
	}
	for _, live := range []bool{false, true} {
		var progOut bytes.Buffer
		rows, details, notes, err := readChild(bytes.NewReader(in.Bytes()), &progress{w: &progOut, live: live, seconds: 2})
		require.NoError(t, err)
		require.Len(t, rows, 2)
		require.Len(t, details, 2)
		assert.Equal(t, 2.0, rows[1].CotenantReadsS)
		assert.Equal(t, []string{note, "skipped std-fs+dontcache: got std-fs: RWF_DONTCACHE: operation not supported"}, notes, "each once, in order")
		if live {
			// One line redrawn in place, with the seconds measured.
			assert.NotContains(t, progOut.String(), "\n")
			assert.Contains(t, progOut.String(), "\r\033[Kdio-check pressure: round 1/2: alone: measuring 1/2 s")
			assert.True(t, strings.HasSuffix(progOut.String(), "\r\033[Kdio-check pressure: round 2/2: alone: measuring 1/2 s"), "%q", progOut.String())
		} else {
			// A line per phase and step, the ticks folded in.
			assert.Equal(t, "dio-check pressure: round 1/2: alone: warming the hot file\n"+
				"dio-check pressure: round 1/2: alone: measuring\n"+
				"dio-check pressure: round 2/2: alone: warming the hot file\n"+
				"dio-check pressure: round 2/2: alone: measuring\n", progOut.String())
		}
	}

	// On a narrow terminal the line is cut to its width, as the bench's
	// is: the phase loses its middle, the seconds measured stay.
	for _, width := range []int{60, 40, 30} {
		var progOut bytes.Buffer
		_, _, _, err := readChild(bytes.NewReader(in.Bytes()), &progress{w: &progOut, live: true, width: width, seconds: 2})
		require.NoError(t, err)
		parts := strings.Split(progOut.String(), "\r\033[K")
		require.Greater(t, len(parts), 4, "%d columns", width)
		for _, part := range parts[1:] {
			assert.True(t, utf8.ValidString(part), "%d columns: %q", width, part)
			assert.LessOrEqual(t, utf8.RuneCountInString(part), width-1, "%d columns: %q", width, part)
			assert.True(t, strings.HasPrefix(part, "dio-check pressure: "), "%d columns: %q", width, part)
		}
		assert.True(t, strings.HasSuffix(progOut.String(), " 1/2 s"), "%d columns: the seconds measured: %q", width, progOut.String())
	}
	var progOut bytes.Buffer
	_, _, _, err := readChild(bytes.NewReader(in.Bytes()), &progress{w: &progOut, live: true, width: 40, seconds: 2})
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(progOut.String(), "\r\033[Kdio-check pressure: roun…easuring 1/2 s"), "%q", progOut.String())

	_, _, _, err = readChild(strings.NewReader(`{"phase":"alone"}`+"\nnot json\n"), &progress{w: io.Discard})
	assert.Error(t, err, "garbage from the measuring process")
}

// TestCPUSteal reads /proc/stat's cpu line and the steal between two
// readings.
func TestCPUSteal(t *testing.T) {
	t0, err := parseCPUTimes([]byte("cpu  100 5 50 800 10 1 4 30 7 0\ncpu0 50 2 25 400 5 0 2 15 3 0\n"))
	require.NoError(t, err)
	assert.Equal(t, cpuTimes{total: 1000, steal: 30}, t0, "guest time is inside user already")
	t1, err := parseCPUTimes([]byte("cpu  150 5 150 950 10 1 4 130 7 0\n"))
	require.NoError(t, err)
	assert.InDelta(t, 25.0, t1.stealPct(t0), 1e-9, "100 of 400 ticks stolen")
	assert.Zero(t, t0.stealPct(t0), "no time passed")
	assert.Zero(t, t0.stealPct(t1), "an earlier reading that is later")
	for _, bad := range []string{"", "intr 1 2 3\n", "cpu 1 2 3 4 5 6 7\n", "cpu 1 2 3 4 5 6 7 x\n"} {
		_, err := parseCPUTimes([]byte(bad))
		assert.Error(t, err, "%q", bad)
	}
	if _, err := os.Stat("/proc/stat"); err == nil {
		now, err := readCPUTimes()
		require.NoError(t, err)
		assert.Positive(t, now.total)
	}
}
