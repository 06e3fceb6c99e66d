package direct

import (
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func testRing(t *testing.T) *ring {
	t.Helper()
	r, err := newRing(8)
	if err != nil {
		t.Skipf("io_uring unavailable: %v", err)
	}
	t.Cleanup(r.close)
	return r
}

// TestRingEnterErrnos pins what each io_uring_enter answer means to the
// two callers: submit does not retry EBUSY (only reaping makes room in
// the CQ, and submit reaps nothing, so a retry would spin) and leaves the
// SQE for rewind to withdraw; it retries EAGAIN a bounded number of times;
// wait hands EBUSY back as "reap and look again" and fails on the rest.
func TestRingEnterErrnos(t *testing.T) {
	r := testRing(t)
	var calls int
	answer := syscall.EBUSY
	r.testEnter = func(uint32, uint32, uint32) (int, syscall.Errno) { calls++; return 0, answer }

	require.True(t, r.push(&sqe{opcode: ioringOpNop, userData: 7}))
	n, err := r.submit()
	require.ErrorIs(t, err, syscall.EBUSY)
	assert.Zero(t, n)
	assert.Equal(t, 1, calls, "EBUSY retried by submit")

	calls, answer = 0, syscall.EAGAIN
	_, err = r.submit()
	require.ErrorIs(t, err, syscall.EAGAIN)
	assert.Equal(t, maxRetries+1, calls, "EAGAIN retries")

	var withdrawn []uint64
	r.rewind(func(ud uint64) { withdrawn = append(withdrawn, ud) })
	assert.Equal(t, []uint64{7}, withdrawn)
	assert.True(t, r.consumed(r.pushed()), "nothing left pushed after rewind")

	for _, e := range []syscall.Errno{syscall.EBUSY, syscall.EINTR, syscall.EAGAIN} {
		answer = e
		assert.NoError(t, r.wait(), "wait on %v", e)
	}
	answer = syscall.EBADF
	assert.ErrorIs(t, r.wait(), syscall.EBADF)

	// The real kernel takes what is pushed after a rewind.
	r.testEnter = nil
	require.True(t, r.push(&sqe{opcode: ioringOpNop, userData: 9}))
	n, err = r.submit()
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	require.NoError(t, r.wait())
	var got []uint64
	r.reap(func(ud uint64, _ int32) { got = append(got, ud) })
	assert.Equal(t, []uint64{9}, got)
}

// privateQueue is a queue on a ring of its own, outside the process's
// set, over a page-cache file, so that a test may interfere with the ring.
func privateQueue(t *testing.T, depth int) (*uring, *uringQueue, *os.File) {
	t.Helper()
	u, err := newURing()
	if err != nil {
		t.Skipf("io_uring unavailable: %v", err)
	}
	t.Cleanup(u.r.close)
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "f"), os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	_, err = f.WriteAt(make([]byte, 1<<16), 0)
	require.NoError(t, err)
	q := &uringQueue{u: u, x: newXfer(f, Alignment{Memory: 1, Offset: 1}, false), depth: depth, drained: make(chan struct{})}
	return u, q, f
}

// TestURingRefusedSubmitLeavesNothing: when the kernel will not take a
// SQE, Submit fails and leaves nothing behind (no op slot, no count in
// the queue or the kernel, no SQE that a later io_uring_enter could pick
// up with a descriptor the caller may have closed), and the ring goes on.
func TestURingRefusedSubmitLeavesNothing(t *testing.T) {
	u, q, _ := privateQueue(t, 4)
	u.r.testEnter = func(toSubmit, _, _ uint32) (int, syscall.Errno) { return 0, syscall.EBUSY }
	buf := make([]byte, 4096)
	done := make(chan Completion, 1)
	err := q.Submit(Request{Op: OpRead, Buf: buf, Done: done})
	require.ErrorIs(t, err, syscall.EBUSY)
	u.mu.Lock()
	assert.Zero(t, q.pending)
	assert.Zero(t, u.inKernel)
	assert.Len(t, u.free, len(u.ops))
	assert.True(t, u.r.consumed(u.r.pushed()), "a refused SQE left in the SQ")
	u.mu.Unlock()

	u.r.testEnter = nil
	require.NoError(t, q.Submit(Request{Op: OpRead, Buf: buf, Token: 3, Done: done}))
	c := q.Await(done)
	require.NoError(t, c.Err)
	assert.Equal(t, uint64(3), c.Token)
	require.NoError(t, q.Close())
}

// TestURingSubmittersCombine: submitters that push while another is in
// the kernel need no io_uring_enter of their own; the next one to submit
// takes every SQE pushed. Here the test holds the submitter's lock while
// four Submits push, then lets them go: one enter submits all four.
func TestURingSubmittersCombine(t *testing.T) {
	u, q, _ := privateQueue(t, 4)
	var enters atomic.Int32
	u.r.testEnter = func(toSubmit, minComplete, flags uint32) (int, syscall.Errno) {
		if toSubmit > 0 {
			enters.Add(1)
		}
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(u.r.fd), uintptr(toSubmit), uintptr(minComplete), uintptr(flags), 0, 0)
		return int(n), errno
	}
	u.smu.Lock()
	var wg sync.WaitGroup
	dones := make([]chan Completion, 4)
	for k := range dones {
		dones[k] = make(chan Completion, 1)
		wg.Go(func() {
			assert.NoError(t, q.Submit(Request{Op: OpRead, Buf: make([]byte, 4096), Off: int64(k) * 4096, Token: uint64(k), Done: dones[k]}))
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		u.mu.Lock()
		n := u.r.pushed() - atomic.LoadUint32(u.r.sqHead)
		u.mu.Unlock()
		if n == 4 {
			break
		}
		require.True(t, time.Now().Before(deadline), "%d of 4 SQEs pushed", n)
		runtime.Gosched()
	}
	u.smu.Unlock()
	wg.Wait()
	assert.Equal(t, int32(1), enters.Load(), "io_uring_enter calls that submitted")
	for k, d := range dones {
		c := q.Await(d)
		require.NoError(t, c.Err)
		assert.Equal(t, uint64(k), c.Token)
	}
	require.NoError(t, q.Close())
}
