package direct

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHistogramBuckets checks that the buckets tile the latencies: each
// bucket's bounds map back to it, each starts where the previous ends,
// and none is wider than an eighth of its lower bound (past the exact
// ones).
func TestHistogramBuckets(t *testing.T) {
	var prevHi time.Duration
	for i := range HistogramBuckets {
		lo, hi := BucketBounds(i)
		require.Equal(t, prevHi, lo, "bucket %d starts where %d ends", i, i-1)
		require.Less(t, lo, hi)
		require.Equal(t, i, bucketOf(int64(lo)), "lo of %d", i)
		if i < HistogramBuckets-1 {
			require.Equal(t, i, bucketOf(int64(hi)-1), "hi-1 of %d", i)
			if i >= 2*histSub {
				require.LessOrEqual(t, hi-lo, lo/histSub, "width of %d", i)
			}
		}
		prevHi = hi
	}
	_, hi := BucketBounds(HistogramBuckets - 1)
	assert.Equal(t, time.Duration(math.MaxInt64), hi)
	assert.Equal(t, HistogramBuckets-1, bucketOf(math.MaxInt64))
	assert.Equal(t, 0, bucketOf(-5), "a clock that went back counts as 0")
	lo, _ := BucketBounds(HistogramBuckets - 1)
	assert.Equal(t, time.Duration(1)<<histMaxBits, lo)
}

// TestQuantile checks quantiles of known distributions to within a
// bucket's width.
func TestQuantile(t *testing.T) {
	var h histRec
	var want []time.Duration
	for i := 1; i <= 10000; i++ { // 1 µs to 10 ms, evenly
		d := time.Duration(i) * time.Microsecond
		h.add(int64(d))
		want = append(want, d)
	}
	var s Histogram
	h.addTo(&s)
	assert.Equal(t, uint64(10000), s.Count())
	for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 0.999} {
		got, exact := s.Quantile(q), want[int(q*10000)-1]
		assert.InDelta(t, float64(exact), float64(got), float64(exact)/histSub, "q %v: %v, want %v", q, got, exact)
	}
	assert.Equal(t, time.Duration(5000500)*time.Nanosecond, s.Mean())
	lo, _ := BucketBounds(bucketOf(int64(time.Microsecond)))
	assert.Equal(t, lo, s.Quantile(0))
	_, hi := BucketBounds(bucketOf(int64(10 * time.Millisecond)))
	assert.Equal(t, hi, s.Quantile(1))
	assert.Equal(t, hi, s.Quantile(7), "q is clamped")

	var empty Histogram
	assert.Zero(t, empty.Quantile(0.5))
	assert.Zero(t, empty.Mean())

	// One slow operation among fast ones: the p99.9 finds it.
	var h2 histRec
	for range 999 {
		h2.add(int64(10 * time.Microsecond))
	}
	h2.add(int64(time.Second))
	var s2 Histogram
	h2.addTo(&s2)
	assert.Less(t, s2.Quantile(0.99), 12*time.Microsecond)
	assert.InDelta(t, float64(time.Second), float64(s2.Quantile(1)), float64(time.Second)/histSub)

	// Past the last bound: its lower bound.
	var h3 histRec
	h3.add(int64(time.Hour))
	var s3 Histogram
	h3.addTo(&s3)
	assert.Equal(t, time.Duration(1)<<histMaxBits, s3.Quantile(0.5))

	// Sub leaves the interval's.
	d := s.Sub(s)
	assert.Zero(t, d.Count())
	s2.add(&s)
	assert.Equal(t, uint64(1000), s2.Sub(s).Count())
}

func TestErrnos(t *testing.T) {
	var r opRec
	r.record(0, fmt.Errorf("wrapped: %w", &os.PathError{Op: "pwrite", Path: "f", Err: syscall.ENOSPC}), 1, 0)
	r.record(0, syscall.EIO, 1, 0)
	r.record(0, syscall.EIO, 1, 0)
	r.record(0, syscall.ENOTDIR, 1, 0)
	r.record(0, os.ErrClosed, 1, 0)
	var s OpStats
	r.addTo(&s)
	assert.Equal(t, uint64(5), s.Errors)
	assert.Equal(t, uint64(1), s.Errnos.Count(syscall.ENOSPC))
	assert.Equal(t, uint64(2), s.Errnos.Count(syscall.EIO))
	assert.Zero(t, s.Errnos.Count(syscall.ENOTDIR), "not counted on its own")
	assert.Equal(t, uint64(1), s.Errnos.Other())
	assert.Equal(t, uint64(1), s.Errnos.NoErrno())
	got := map[string]uint64{}
	for name, n := range s.Errnos.All() {
		got[name] = n
	}
	assert.Equal(t, map[string]uint64{"ENOSPC": 1, "EIO": 2, "other": 1, "none": 1}, got)
}

func TestBadSectors(t *testing.T) {
	one := &SectorError{Off: 0, Len: 1024}
	assert.Equal(t, 2, badSectors(one, 512))
	assert.Equal(t, 3, badSectors(errors.Join(one, &SectorError{Off: 4096, Len: 100}), 512))
	assert.Zero(t, badSectors(syscall.EIO, 512))
	assert.Zero(t, badSectors(nil, 512))
}

func TestBatchSlot(t *testing.T) {
	for n, want := range map[int]int{1: 0, 2: 1, 3: 2, 4: 2, 5: 3, 8: 3, 9: 4, 128: 7, 129: 8, 1 << 20: 8} {
		assert.Equal(t, want, batchSlot(n), "batch of %d", n)
	}
}

// TestWatchFull checks that an operation that finds no free slot goes
// unwatched rather than wait.
func TestWatchFull(t *testing.T) {
	w := newWatch(SlowPolicy{Threshold: time.Hour, Report: func(SlowIO) {}}, &Meter{})
	w.closed.Store(true) // no loop checks
	var held []int32
	for range watchSlots {
		i := w.claim(OpRead, 0, 1, nil, monotonic())
		if i >= 0 {
			held = append(held, i)
		}
	}
	for len(held) < watchSlots { // claims try a few slots only: fill the rest
		i := w.claim(OpRead, 0, 1, nil, monotonic())
		if i >= 0 {
			held = append(held, i)
		}
	}
	assert.Equal(t, int32(-1), w.claim(OpWrite, 0, 1, nil, monotonic()))
	w.release(held[0])
	var got int32 = -1
	for range watchSlots {
		if got = w.claim(OpWrite, 0, 1, nil, monotonic()); got >= 0 {
			break
		}
	}
	assert.Equal(t, held[0], got)
	assert.True(t, w.inFlight())
}

// TestEngineRec checks the engine's counters and their snapshot.
func TestEngineRec(t *testing.T) {
	var sh shard
	sh.engine.entered(1)
	sh.engine.entered(5)
	sh.engine.woke(64)
	sh.engine.rings.Add(2)
	sh.engine.inFlight.Add(3)
	var s IOStats
	sh.addTo(&s)
	e := s.Engine
	assert.Equal(t, EngineStats{Rings: 2, InFlight: 3, Enters: 2, Submitted: 6, Wakes: 1, Reaped: 64,
		PerEnter: Batches{0: 1, 3: 1}, PerWake: Batches{6: 1}}, e)
	assert.Equal(t, 3.0, e.SubmittedPerEnter())
	assert.Equal(t, 64.0, e.ReapedPerWake())
	d := e.Sub(e)
	assert.Equal(t, EngineStats{Rings: 2, InFlight: 3}, d, "gauges stay")
	assert.Zero(t, EngineStats{}.ReapedPerWake())

	x := xfer{direct: true}
	assert.Equal(t, PathURing, x.uringPath())
	assert.Equal(t, PathPwrite, x.syncPath())
	x.direct = false
	assert.Equal(t, PathStdFS, x.uringPath())
	assert.Equal(t, PathStdFS, x.syncPath())
}

// TestEndBatchAsEndAt records one sequence of operations ending, runs of
// one file and kind broken by others, errors, retries and io.EOF among
// them, once through endAt and queued(-1) and once through an
// endBatch: the process's counts and each Meter's come out the same.
func TestEndBatchAsEndAt(t *testing.T) {
	type end struct {
		file    int // 0 or 1
		op      Op
		n       int
		err     error
		ns      int64
		retries int
	}
	seq := []end{
		{0, OpRead, 4096, nil, 900, 0}, {0, OpRead, 512, io.EOF, 1500, 0}, {0, OpRead, 0, syscall.EIO, 70_000, 0},
		{1, OpRead, 8192, nil, 2000, 1}, {0, OpRead, 4096, nil, 800, 0}, {0, OpWrite, 65536, nil, 30_000, 0},
		{0, OpSync, 0, nil, 2_000_000, 0}, {1, OpRead, 4096, nil, 1000, 0}, {1, OpRead, 4096, nil, 3000, 2},
	}
	record := func(batch bool) (IOStats, [2]MeterStats) {
		var xs [2]xfer
		var ms [2]*Meter
		for i := range xs {
			m, err := NewMeter(&MeterOptions{SyncLatency: true})
			require.NoError(t, err)
			ms[i] = m
			xs[i] = xfer{direct: true, shard: uint8(i), meter: m}
		}
		for _, e := range seq {
			xs[e.file].queued(1)
		}
		before := Stats()
		const now = 10_000_000
		var b endBatch
		for _, e := range seq {
			x, tk := &xs[e.file], tick{start: now - e.ns, slot: -1}
			if batch {
				b.end(x, now, tk, x.uringPath(), e.op, e.n, e.err, e.retries)
			} else {
				x.endAt(now, tk, x.uringPath(), e.op, e.n, e.err, e.retries)
				x.queued(-1)
			}
		}
		b.flush()
		return Stats().Sub(before), [2]MeterStats{ms[0].Stats(), ms[1].Stats()}
	}
	gotIO, gotM := record(true)
	wantIO, wantM := record(false)
	assert.Equal(t, wantIO, gotIO)
	assert.Equal(t, wantM, gotM)
	assert.Equal(t, uint64(len(seq)), gotIO.Read.Ops+gotIO.Write.Ops+gotIO.Sync.Ops)
	assert.Equal(t, uint64(4*4096+8192+512), gotIO.Read.Bytes)
	assert.Equal(t, uint64(1), gotIO.Read.Errors)
	assert.Equal(t, uint64(3), gotIO.Read.Retries)
	assert.Equal(t, uint64(4), gotM[0].Read.Ops)
	assert.Equal(t, uint64(3), gotM[1].Read.Ops)
	assert.Equal(t, uint64(1), gotM[0].SyncLatency.Count())
}
