package direct

import (
	"errors"
	"io/fs"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reads returns n 4 KiB reads with Tokens 0..n-1, each with a Done of its
// own.
func reads(n int) ([]Request, []chan Completion) {
	rs := make([]Request, n)
	dones := make([]chan Completion, n)
	for k := range rs {
		dones[k] = make(chan Completion, 1)
		rs[k] = Request{Op: OpRead, Buf: make([]byte, 4096), Off: int64(k%16) * 4096, Token: uint64(k), Done: dones[k]}
	}
	return rs, dones
}

// TestURingBatchOneEnter: a batch that fits the queue's depth goes into
// the kernel with one io_uring_enter, however many requests it holds.
func TestURingBatchOneEnter(t *testing.T) {
	u, q, _ := privateQueue(t, 64)
	var enters atomic.Int32
	u.r.testEnter = func(toSubmit, minComplete, flags uint32) (int, syscall.Errno) {
		if toSubmit > 0 {
			enters.Add(1)
		}
		return u.r.enterKernel(toSubmit, minComplete, flags)
	}
	rs, dones := reads(48)
	n, err := q.SubmitBatch(rs)
	require.NoError(t, err)
	assert.Equal(t, 48, n)
	assert.Equal(t, int32(1), enters.Load(), "io_uring_enter calls that submitted")
	awaitAll(t, q, dones)
	require.NoError(t, q.Close())
}

// TestURingBatchLongerThanDepth: a batch longer than Depth goes in as
// room comes back, and every request completes once with its Token.
func TestURingBatchLongerThanDepth(t *testing.T) {
	_, q, _ := privateQueue(t, 4)
	rs, dones := reads(37)
	done := make(chan struct{})
	go func() {
		defer close(done)
		awaitAll(t, q, dones) // Await reaps, so room comes back
	}()
	n, err := q.SubmitBatch(rs)
	require.NoError(t, err)
	assert.Equal(t, 37, n)
	<-done
	require.NoError(t, q.Close())
}

// TestURingBatchHalfAccepted: the kernel takes part of a batch and then
// refuses the rest. SubmitBatch reports how many it accepted and why it
// stopped; those complete, each once with its Token, and the rest leave
// nothing behind: no op slot, no count, no SQE a later enter could take.
func TestURingBatchHalfAccepted(t *testing.T) {
	u, q, _ := privateQueue(t, 16)
	var calls int
	u.r.testEnter = func(toSubmit, minComplete, flags uint32) (int, syscall.Errno) {
		if toSubmit == 0 {
			return u.r.enterKernel(toSubmit, minComplete, flags)
		}
		if calls++; calls == 1 {
			return u.r.enterKernel(3, minComplete, flags) // the kernel took 3
		}
		return 0, syscall.ENOMEM
	}
	rs, dones := reads(8)
	n, err := q.SubmitBatch(rs)
	require.ErrorIs(t, err, syscall.ENOMEM)
	require.Equal(t, 3, n)
	u.mu.Lock()
	assert.Equal(t, 3, q.pending)
	assert.True(t, u.r.consumed(u.r.pushed()), "a refused SQE left in the SQ")
	u.mu.Unlock()
	awaitAll(t, q, dones[:3])
	for _, d := range dones[3:] {
		assert.Empty(t, d, "a refused request completed")
	}
	u.mu.Lock()
	assert.Zero(t, q.pending)
	assert.Len(t, u.free, len(u.ops))
	u.mu.Unlock()

	// The ring goes on.
	u.r.testEnter = nil
	rs, dones = reads(8)
	n, err = q.SubmitBatch(rs)
	require.NoError(t, err)
	assert.Equal(t, 8, n)
	awaitAll(t, q, dones)
	require.NoError(t, q.Close())
}

// TestURingBatchRingBreaks: the ring breaks while a batch longer than
// Depth waits for room. The requests it got in complete, each once with
// its Token and the ring's error; the batch reports how many and the
// ring's error; nothing of the rest is counted, and Close returns.
func TestURingBatchRingBreaks(t *testing.T) {
	u, q, _ := privateQueue(t, 4)
	cause := errors.New("ring gone")
	u.mu.Lock()
	u.testFail = func() error { return cause }
	u.mu.Unlock()
	rs, dones := reads(12)
	n, err := q.SubmitBatch(rs)
	require.ErrorIs(t, err, cause)
	require.Equal(t, 4, n)
	for k, d := range dones[:4] {
		c := q.Await(d)
		assert.Equal(t, uint64(k), c.Token)
		assert.ErrorIs(t, c.Err, cause)
	}
	for _, d := range dones[4:] {
		assert.Empty(t, d)
	}
	n, err = q.SubmitBatch(rs)
	assert.Zero(t, n)
	assert.ErrorIs(t, err, cause)
	require.NoError(t, q.Close())
}

// TestURingBatchClosedFile: a batch on a file closed already is refused
// whole with fs.ErrClosed, and leaves nothing counted.
func TestURingBatchClosedFile(t *testing.T) {
	u, q, f := privateQueue(t, 8)
	require.NoError(t, f.Close())
	rs, _ := reads(5)
	n, err := q.SubmitBatch(rs)
	assert.Zero(t, n)
	assert.True(t, errors.Is(err, fs.ErrClosed), "%v", err)
	u.mu.Lock()
	assert.Zero(t, q.pending)
	assert.Len(t, u.free, len(u.ops))
	u.mu.Unlock()
	require.NoError(t, q.Close())
}

// TestURingBatchAllocs: a warm SubmitBatch allocates nothing, as Submit
// does not: a batch of two reads would otherwise spend on its
// allocations much of what its one io_uring_enter saves.
func TestURingBatchAllocs(t *testing.T) {
	if testing.Short() || raceOn {
		t.Skip("AllocsPerRun: -short, or -race (make test runs it without)")
	}
	_, q, _ := privateQueue(t, 8)
	rs, dones := reads(2)
	run := func() {
		n, err := q.SubmitBatch(rs)
		if err != nil || n != len(rs) {
			t.Fatalf("SubmitBatch: %d, %v", n, err)
		}
		for _, d := range dones {
			if c := q.Await(d); c.Err != nil {
				t.Fatal(c.Err)
			}
		}
	}
	run() // warm the pool
	assert.Zero(t, testing.AllocsPerRun(100, run), "allocations per SubmitBatch of two reads and their Awaits")
	require.NoError(t, q.Close())
}
