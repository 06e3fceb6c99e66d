package direct_test

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/faults"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestStatsQueueURing runs a known workload through the io_uring engine,
// single requests and a batch, with faults planted, and checks the
// counts under direct+io_uring, the meter's, and the engine's own.
func TestStatsQueueURing(t *testing.T) {
	dir := testenv.Dir(t)
	if err := fallback.URingErrorAt(dir); err != nil {
		t.Skipf("io_uring unavailable: %v", err)
	}
	m, err := direct.NewMeter(nil)
	require.NoError(t, err)
	base := openOrSkip(t, filepath.Join(dir, "f"), os.O_RDWR|os.O_CREATE)
	defer base.Close()
	plan := faults.NewPlan(
		faults.Transient(direct.OpWrite, 2, syscall.EAGAIN),
		faults.Rule{Op: direct.OpSync, Times: 1, Fault: direct.Fault{Err: syscall.EIO}},
	)
	f := base.WithFaults(plan).WithMeter(m)
	q, err := f.NewQueue(&direct.QueueOptions{Engine: direct.EngineURing, Depth: 8})
	require.NoError(t, err)
	defer q.Close()
	u := unitOf(f)
	buf := blocks(t, f, 8, 9)

	before := direct.Stats()
	for i := range 4 {
		require.NoError(t, do(t, q, direct.Request{Op: direct.OpWrite, Buf: buf[i*u : (i+1)*u], Off: int64(i * u)}).Err)
	}
	// A batch of four more, in one SubmitBatch.
	done := make(chan direct.Completion, 4)
	var rs []direct.Request
	for i := 4; i < 8; i++ {
		rs = append(rs, direct.Request{Op: direct.OpWrite, Buf: buf[i*u : (i+1)*u], Off: int64(i * u), Done: done})
	}
	n, err := q.(interface {
		SubmitBatch([]direct.Request) (int, error)
	}).SubmitBatch(rs)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	for range 4 {
		require.NoError(t, q.Await(done).Err)
	}
	require.ErrorIs(t, do(t, q, direct.Request{Op: direct.OpSync}).Err, syscall.EIO)
	require.NoError(t, do(t, q, direct.Request{Op: direct.OpSync}).Err)
	c := do(t, q, direct.Request{Op: direct.OpRead, Buf: buf[:4*u], Off: int64(6 * u)})
	require.ErrorIs(t, c.Err, io.EOF)
	require.Equal(t, 2*u, c.N)
	s := direct.Stats().Sub(before)

	p := s.Paths[direct.PathURing]
	checkOp(t, "write", p.Write, want{8, 0, 2, uint64(8 * u)})
	checkOp(t, "sync", p.Sync, want{2, 1, 0, 0})
	assert.Equal(t, uint64(1), p.Sync.Errnos.Count(syscall.EIO))
	checkOp(t, "read", p.Read, want{1, 0, 1, uint64(2 * u)})
	assert.Zero(t, s.Paths[direct.PathPwrite].Write.Ops)
	checkCounts(t, "write", m.Stats().Write, want{8, 0, 2, uint64(8 * u)})

	e := s.Engine
	t.Logf("engine: %+v", e)
	assert.GreaterOrEqual(t, e.Submitted, uint64(8+2+1), "every request and retry submitted")
	assert.LessOrEqual(t, e.Enters, e.Submitted)
	assert.GreaterOrEqual(t, e.Reaped, uint64(8+2+1))
	assert.Positive(t, e.Rings)
	assert.Zero(t, e.InFlight, "nothing in flight after the last completion")
}

// TestSlowURing delays a write's completion through the fault seam and
// checks it is reported while in flight, once.
func TestSlowURing(t *testing.T) {
	dir := testenv.Dir(t)
	if err := fallback.URingErrorAt(dir); err != nil {
		t.Skipf("io_uring unavailable: %v", err)
	}
	reports := make(chan direct.SlowIO, 8)
	m, err := direct.NewMeter(&direct.MeterOptions{Slow: &direct.SlowPolicy{Threshold: 30 * time.Millisecond, Report: func(s direct.SlowIO) { reports <- s }}})
	require.NoError(t, err)
	defer m.Close()
	base := openOrSkip(t, filepath.Join(dir, "f"), os.O_RDWR|os.O_CREATE)
	defer base.Close()
	f := base.WithFaults(faults.NewPlan(faults.Late(direct.OpWrite, 1, 500*time.Millisecond))).WithMeter(m)
	q, err := f.NewQueue(&direct.QueueOptions{Engine: direct.EngineURing})
	require.NoError(t, err)
	defer q.Close()
	u := unitOf(f)
	buf := blocks(t, f, 1, 1)
	done := make(chan direct.Completion, 1)
	require.NoError(t, q.Submit(direct.Request{Op: direct.OpWrite, Buf: buf, Off: int64(5 * u), Done: done}))
	var c direct.Completion
	select {
	case r := <-reports:
		assert.Equal(t, direct.OpWrite, r.Op)
		assert.Equal(t, int64(5*u), r.Off)
		assert.Equal(t, f.Name(), r.Name)
		select {
		case c = <-done:
			t.Fatal("the write had completed when it was reported")
		default:
		}
	case c = <-done:
		t.Fatalf("completed (%v) without a report", c.Err)
	}
	c = q.Await(done)
	require.NoError(t, c.Err)
	time.Sleep(100 * time.Millisecond)
	assert.Empty(t, reports)
}
