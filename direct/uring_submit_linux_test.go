package direct

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	n, err := r.submit(r.pushed())
	require.ErrorIs(t, err, syscall.EBUSY)
	assert.Zero(t, n)
	assert.Equal(t, 1, calls, "EBUSY retried by submit")

	calls, answer = 0, syscall.EAGAIN
	_, err = r.submit(r.pushed())
	require.ErrorIs(t, err, syscall.EAGAIN)
	assert.Equal(t, maxRetries+1, calls, "EAGAIN retries")

	var withdrawn []uint64
	r.rewind(func(ud uint64) { withdrawn = append(withdrawn, ud) })
	assert.Equal(t, []uint64{7}, withdrawn)
	assert.True(t, r.consumed(r.pushed()), "nothing left pushed after rewind")

	for _, e := range []syscall.Errno{syscall.EBUSY, syscall.EINTR, syscall.EAGAIN} {
		answer = e
		assert.NoError(t, r.wait(true), "wait on %v", e)
	}
	answer = syscall.EBADF
	assert.ErrorIs(t, r.wait(true), syscall.EBADF)

	// The real kernel takes what is pushed after a rewind.
	r.testEnter = nil
	require.True(t, r.push(&sqe{opcode: ioringOpNop, userData: 9}))
	n, err = r.submit(r.pushed())
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	require.NoError(t, r.wait(true))
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

// awaitAll awaits each request k of dones, with Token k.
func awaitAll(t *testing.T, q *uringQueue, dones []chan Completion) {
	t.Helper()
	for k, d := range dones {
		c := q.Await(d)
		require.NoError(t, c.Err)
		assert.Equal(t, uint64(k), c.Token)
	}
}

// TestURingSubmitTakenAlong: a submitter whose SQE another's
// io_uring_enter took along makes no call of its own. Here the test
// holds the submitters out (smu for writing) while four Submits push,
// submits their SQEs itself, then lets them go: they make no call.
func TestURingSubmitTakenAlong(t *testing.T) {
	u, q, _ := privateQueue(t, 4)
	var enters atomic.Int32
	u.r.testEnter = func(toSubmit, minComplete, flags uint32) (int, syscall.Errno) {
		if toSubmit > 0 {
			enters.Add(1)
		}
		return u.r.enterKernel(toSubmit, minComplete, flags)
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
	n, err := u.r.submit(u.r.pushed()) // as another submitter would
	require.NoError(t, err)
	require.Equal(t, 4, n)
	enters.Store(0)
	u.mu.Lock()
	u.inKernel += n
	u.unpark()
	u.mu.Unlock()
	u.smu.Unlock()
	wg.Wait()
	assert.Zero(t, enters.Load(), "io_uring_enter calls by submitters whose SQEs were taken")
	awaitAll(t, q, dones)
	require.NoError(t, q.Close())
}

// TestURingSubmittersSideBySide: a submitter does not wait for another
// one that is in the kernel. Here the first Submit's io_uring_enter is
// held; a second Submit still returns, its SQE taken by its own call,
// and when the first call goes on it finds its SQE taken too.
func TestURingSubmittersSideBySide(t *testing.T) {
	u, q, _ := privateQueue(t, 4)
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	u.r.testEnter = func(toSubmit, minComplete, flags uint32) (int, syscall.Errno) {
		if toSubmit > 0 && calls.Add(1) == 1 {
			close(entered)
			<-release
		}
		return u.r.enterKernel(toSubmit, minComplete, flags)
	}
	dones := []chan Completion{make(chan Completion, 1), make(chan Completion, 1)}
	first := make(chan error, 1)
	go func() {
		first <- q.Submit(Request{Op: OpRead, Buf: make([]byte, 4096), Token: 0, Done: dones[0]})
	}()
	<-entered
	second := make(chan error, 1)
	go func() {
		second <- q.Submit(Request{Op: OpRead, Buf: make([]byte, 4096), Off: 4096, Token: 1, Done: dones[1]})
	}()
	select {
	case err := <-second:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("a Submit waited for another submitter's io_uring_enter")
	}
	close(release)
	require.NoError(t, <-first)
	awaitAll(t, q, dones)
	require.NoError(t, q.Close())
}

// TestURingWithdrawnNOPNeedsNoEnter: a late delivery's wake-up NOP that
// another submitter's failure withdrew before its flush ran is settled:
// the flush makes no io_uring_enter call for it.
func TestURingWithdrawnNOPNeedsNoEnter(t *testing.T) {
	u, _, _ := privateQueue(t, 4)
	var calls atomic.Int32
	u.r.testEnter = func(toSubmit, minComplete, flags uint32) (int, syscall.Errno) {
		calls.Add(1)
		return u.r.enterKernel(toSubmit, minComplete, flags)
	}
	u.smu.Lock()
	u.mu.Lock()
	require.True(t, u.r.push(&sqe{opcode: ioringOpNop, userData: nopData}))
	u.nopQueued = true
	seq := u.r.pushed()
	u.withdraw(errors.New("refused"))
	u.mu.Unlock()
	u.smu.Unlock()
	require.NoError(t, u.flush(-1, 0, seq))
	assert.Zero(t, calls.Load(), "io_uring_enter calls for a withdrawn NOP")
}

// TestURingEnterGoneRetires: a ring whose every io_uring_enter fails
// with an error that says the ring is unusable (EBADF here) is broken
// and retired at the first refused Submit, although nothing ever got
// into the kernel for a reaper's wait to fail on: later Submits fail at
// once with the ring's error, and new queues get another ring. A refusal
// the ring survives (ENOMEM) leaves it in service.
func TestURingEnterGoneRetires(t *testing.T) {
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "f"), os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteAt(make([]byte, 1<<16), 0)
	require.NoError(t, err)
	newQ := func() *uringQueue {
		q, err := NewQueue(f, &QueueOptions{Engine: EngineURing, Depth: 4})
		if err != nil {
			t.Skipf("io_uring unavailable: %v", err)
		}
		return q.(*uringQueue)
	}
	live := func(u *uring) bool {
		rings.mu.Lock()
		defer rings.mu.Unlock()
		return slices.Contains(rings.live, u)
	}
	q := newQ()
	u := q.u
	done := make(chan Completion, 1)
	read := Request{Op: OpRead, Buf: make([]byte, 4096), Done: done}

	var calls atomic.Int32
	u.r.testEnter = func(uint32, uint32, uint32) (int, syscall.Errno) { calls.Add(1); return 0, syscall.ENOMEM }
	require.ErrorIs(t, q.Submit(read), syscall.ENOMEM)
	assert.True(t, live(u), "a ring retired for ENOMEM")
	u.mu.Lock()
	assert.NoError(t, u.err)
	u.mu.Unlock()

	u.r.testEnter = func(uint32, uint32, uint32) (int, syscall.Errno) { calls.Add(1); return 0, syscall.EBADF }
	require.ErrorIs(t, q.Submit(read), syscall.EBADF)
	assert.False(t, live(u), "a ring whose enters fail with EBADF still in service")
	select {
	case <-u.broken:
	case <-time.After(10 * time.Second):
		t.Fatal("the ring was not drained")
	}
	calls.Store(0)
	err = q.Submit(read)
	require.ErrorIs(t, err, syscall.EBADF)
	assert.ErrorContains(t, err, "ring broken")
	assert.Zero(t, calls.Load(), "a Submit on the broken ring entered the kernel")
	c := q.Await(done)
	assert.Equal(t, Op(0), c.Op, "a Completion for a refused request")

	q2 := newQ()
	assert.NotSame(t, u, q2.u, "a new queue got the retired ring")
	require.NoError(t, q2.Submit(read))
	require.NoError(t, q2.Await(done).Err)
	require.NoError(t, q2.Close())
	require.NoError(t, q.Close())
}
