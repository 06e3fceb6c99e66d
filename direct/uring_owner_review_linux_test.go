package direct

import (
	"math/rand/v2"
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

// ownerLeft waits up to d for the owner to give the seat up.
func ownerLeft(u *uring, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		u.mu.Lock()
		on := u.ownerOn
		u.mu.Unlock()
		if !on {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// TestURingOwnerReadOnlyPushed: an owner's enter that consumed nothing
// (EAGAIN: the kernel could not allocate a request) leaves its eventfd
// read pushed; with nothing due after that, the next turn must not wait
// in the kernel for a CQE only a kick would post (with smu held for
// reading, so that a refused submitter's withdraw would wait too).
func TestURingOwnerReadOnlyPushed(t *testing.T) {
	u := ownerRing(t)
	q, _ := ownerFile(t, u, 'a', 4)
	var refused, refuseBatch atomic.Bool
	u.r.testEnter = func(toSubmit, minComplete, flags uint32) (int, syscall.Errno) {
		if toSubmit > 0 && flags&ioringEnterGetEvents != 0 && refused.CompareAndSwap(false, true) {
			return 0, syscall.EAGAIN // the owner's first enter: its read alone
		}
		if toSubmit > 0 && flags&ioringEnterGetEvents == 0 && refuseBatch.Load() {
			return 0, syscall.ENOMEM
		}
		return u.r.enterKernel(toSubmit, minComplete, flags)
	}
	done := make(chan Completion, 1)
	// No owner yet: the Submit enters itself (a page-cache read completes
	// inline), then the Await takes the seat and hands it to the owner.
	require.NoError(t, q.Submit(Request{Op: OpRead, Buf: make([]byte, 4096), Token: 1, Done: done}))
	c := q.Await(done)
	require.NoError(t, c.Err)
	require.True(t, refused.Load(), "the owner's enter was not refused")
	left := ownerLeft(u, 2*time.Second)
	// A batch refused meanwhile withdraws its SQE, which takes smu for
	// writing: it must not wait for an owner that waits for nothing.
	refuseBatch.Store(true)
	batchDone := make(chan error, 1)
	go func() {
		_, err := q.SubmitBatch([]Request{{Op: OpRead, Buf: make([]byte, 4096), Token: 2, Done: done}})
		batchDone <- err
	}()
	select {
	case err := <-batchDone:
		assert.ErrorIs(t, err, syscall.ENOMEM)
	case <-time.After(2 * time.Second):
		t.Error("a refused SubmitBatch hangs behind the owner's wait")
	}
	if !left {
		// Free it as a kick would, so that the ring can be closed.
		one := [8]byte{1}
		_, _ = unix.Write(u.efd, one[:])
	}
	assert.True(t, left, "the owner waits in the kernel with nothing due but its own read")
	if !left {
		require.ErrorIs(t, <-batchDone, syscall.ENOMEM)
	}
	require.NoError(t, q.Close())
}

// TestURingOwnerReadSeqWraps: the owner's read stays in the kernel after
// the owner leaves, until a later owner is kicked; a service that runs
// with few goroutines meanwhile pushes SQEs past it, and once 2^31 have
// gone by, the SQ head compares below its sequence number as if it had
// never been consumed. Simulated here by moving the number back 2^31:
// then due counted the read as owed, and an owner waited for it.
func TestURingOwnerReadSeqWraps(t *testing.T) {
	u := ownerRing(t)
	q, _ := ownerFile(t, u, 'w', 4)
	done := make(chan Completion, 1)
	read := func(token uint64) {
		t.Helper()
		require.NoError(t, q.Submit(Request{Op: OpRead, Buf: make([]byte, 4096), Token: token, Done: done}))
		c := q.Await(done)
		require.NoError(t, c.Err)
		require.Equal(t, token, c.Token)
	}
	read(1) // an owner arms its read, which it leaves in the kernel
	require.True(t, ownerLeft(u, 2*time.Second), "the owner did not leave")
	u.mu.Lock()
	in := u.armed && u.r.consumed(u.armSeq)
	u.armSeq -= 1 << 31 // 2^31 SQEs pushed since
	due := u.due()
	u.mu.Unlock()
	require.True(t, in, "the owner's read is not in the kernel")
	assert.LessOrEqual(t, due, 0, "nothing owed but the owner's read")
	read(2)
	left := ownerLeft(u, 2*time.Second)
	if !left {
		one := [8]byte{1}
		_, _ = unix.Write(u.efd, one[:])
	}
	assert.True(t, left, "the owner waits in the kernel for its own read")
	require.NoError(t, q.Close())
}

// shortWhenReleased cuts the first read at offset 0 short, and holds the
// reaper that asks until released: it then resubmits the rest.
type shortWhenReleased struct {
	fired   atomic.Bool
	asked   chan struct{}
	release chan struct{}
}

func (f *shortWhenReleased) Inject(op Op, off int64, n int) (Fault, bool) {
	if op == OpRead && off == 0 && n == 4096 && f.fired.CompareAndSwap(false, true) {
		close(f.asked)
		<-f.release
		return Fault{Short: 512}, true
	}
	return Fault{}, false
}

// TestURingOwnerResubmitNotHanded: a request handed to the owner and cut
// short is resubmitted by the reaper (the owner, here) with the file's
// descriptor. That SQE is no longer handed off: when another submitter's
// refused enter withdraws it, the refusal goes to the resubmitter, as
// for any SQE it pushed. While the op still said handed, the withdraw
// completed it through failHanded instead, and the resubmitter, finding
// its SQE neither consumed nor refused, entered the kernel with nothing
// to submit until it gave up (maxRetries) and withdrew what others had
// pushed meanwhile as "submission not consumed".
func TestURingOwnerResubmitNotHanded(t *testing.T) {
	u := ownerRing(t)
	q, _ := ownerFile(t, u, 'h', 8)
	inj := &shortWhenReleased{asked: make(chan struct{}), release: make(chan struct{})}
	q.x.faults = inj
	var hold, phase, inC atomic.Bool
	var calls, empty atomic.Int32
	u.r.testEnter = func(toSubmit, minComplete, flags uint32) (int, syscall.Errno) {
		for flags&ioringEnterGetEvents != 0 && hold.Load() {
			time.Sleep(100 * time.Microsecond) // the owner, held in its enter
		}
		if flags&ioringEnterGetEvents == 0 && phase.Load() {
			if toSubmit == 0 {
				empty.Add(1)
			} else {
				switch calls.Add(1) {
				case 1: // C: holds smu for reading until the resubmission is pushed
					inC.Store(true)
					for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
						u.mu.Lock()
						pushed := u.r.sqLocalTail - atomic.LoadUint32(u.r.sqHead)
						u.mu.Unlock()
						if pushed >= 3 { // C's, W's and the resubmission
							break
						}
						time.Sleep(100 * time.Microsecond)
					}
					time.Sleep(20 * time.Millisecond) // the resubmitter waits behind W
				case 2: // W: refused
					return 0, syscall.ENOMEM
				}
			}
		}
		return u.r.enterKernel(toSubmit, minComplete, flags)
	}

	// An owner, held in its first enter, so that X is handed to it.
	hold.Store(true)
	doneA, doneX := make(chan Completion, 1), make(chan Completion, 2)
	require.NoError(t, q.Submit(Request{Op: OpRead, Buf: make([]byte, 4096), Off: 4096, Token: 1, Done: doneA}))
	awaitedA := make(chan Completion, 1)
	go func() { awaitedA <- q.Await(doneA) }()
	require.Eventually(t, func() bool {
		u.mu.Lock()
		defer u.mu.Unlock()
		return u.ownerIn
	}, 5*time.Second, 100*time.Microsecond, "no owner")
	require.NoError(t, q.Submit(Request{Op: OpRead, Buf: make([]byte, 4096), Token: 2, Done: doneX}))
	u.mu.Lock()
	handed := false
	for i := range u.ops {
		if u.ops[i].req.Token == 2 && u.ops[i].handed {
			handed = true
		}
	}
	u.mu.Unlock()
	require.True(t, handed, "X was not handed to the owner")
	hold.Store(false)
	require.NoError(t, (<-awaitedA).Err)
	select {
	case <-inj.asked: // the owner reaped X and holds it
	case <-time.After(5 * time.Second):
		t.Fatal("X was not reaped")
	}

	// C holds smu for reading; W, refused, waits to withdraw; then the
	// owner resubmits the rest of X, behind W.
	phase.Store(true)
	doneC, doneW := make(chan Completion, 1), make(chan Completion, 1)
	cErr := make(chan error, 1)
	go func() {
		_, err := q.SubmitBatch([]Request{{Op: OpRead, Buf: make([]byte, 4096), Off: 8192, Token: 3, Done: doneC}})
		cErr <- err
	}()
	require.Eventually(t, inC.Load, 5*time.Second, 100*time.Microsecond)
	wErr := make(chan error, 1)
	go func() {
		n, err := q.SubmitBatch([]Request{{Op: OpRead, Buf: make([]byte, 4096), Off: 12288, Token: 4, Done: doneW}})
		assert.Zero(t, n)
		wErr <- err
	}()
	require.Eventually(t, func() bool { return calls.Load() >= 2 }, 5*time.Second, 100*time.Microsecond)
	time.Sleep(20 * time.Millisecond) // W waits for smu
	close(inj.release)
	assert.ErrorIs(t, <-wErr, syscall.ENOMEM)
	require.NoError(t, <-cErr)
	require.NoError(t, q.Await(doneC).Err)

	c := q.Await(doneX)
	assert.Equal(t, uint64(2), c.Token)
	assert.ErrorIs(t, c.Err, syscall.ENOMEM, "the resubmission was withdrawn by W's refusal")
	time.Sleep(20 * time.Millisecond)
	select {
	case c := <-doneX:
		t.Errorf("a second Completion for X: %+v", c)
	default:
	}
	assert.Zero(t, empty.Load(), "enters with nothing to submit: the resubmitter spun")
	require.NoError(t, q.Close())
}

// TestURingOwnerProcsChange: the owner by its own rule (more waiters
// than Ps, more than one P) while GOMAXPROCS changes every few
// milliseconds between 1 and 4, queues close and reopen beside their
// readers, and short, retried and late completions come and go; with
// and without the kernel's timed wait (the owner's linger). Every read
// completes once, with its file's bytes; nothing hangs; the owner leaves
// at the end, every slot comes back and no descriptor is left open.
func TestURingOwnerProcsChange(t *testing.T) {
	for _, extArg := range []bool{true, false} {
		t.Run(map[bool]string{true: "linger", false: "nolinger"}[extArg], func(t *testing.T) {
			u := ownerRing(t)
			u.testOwner = false
			if !extArg {
				u.r.extArg = false
			}
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
			fds := openFds(t)
			d := time.Second
			if testing.Short() {
				d = 200 * time.Millisecond
			}
			var stop atomic.Bool
			var wg sync.WaitGroup
			var reads, handed atomic.Int64
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					runtime.GOMAXPROCS(1 + rand.IntN(4))
					time.Sleep(time.Duration(1+rand.IntN(4)) * time.Millisecond)
				}
			}()
			for k := range 2 {
				var prepare func(*uringQueue)
				if k == 1 {
					prepare = func(q *uringQueue) { q.x.faults = &churn{} }
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					queueChurn(t, u, byte('p'+k), 10, 30*time.Millisecond, 60*time.Millisecond, prepare, &stop, &reads, &handed)
				}()
			}
			time.Sleep(d)
			stop.Store(true)
			finished := make(chan struct{})
			go func() { wg.Wait(); close(finished) }()
			select {
			case <-finished:
			case <-time.After(30 * time.Second):
				buf := make([]byte, 1<<20)
				t.Fatalf("hung:\n%s", buf[:runtime.Stack(buf, true)])
			}
			runtime.GOMAXPROCS(2)
			t.Logf("%d reads; %d queues handed requests to the owner", reads.Load(), handed.Load())
			assert.Positive(t, handed.Load(), "no owner")
			require.True(t, ownerLeft(u, 5*time.Second), "the owner did not leave")
			assertSettled(t, u, fds)
		})
	}
}

// TestURingOwnerQueueDropped: a queue that handed requests to the owner
// and is dropped without Close does not keep its duplicate descriptor
// (and its file) open for good: a cleanup closes it once the queue is
// unreachable, which it is only when none of its requests is in flight.
func TestURingOwnerQueueDropped(t *testing.T) {
	u := ownerRing(t)
	fds := openFds(t)
	func() {
		q, f := ownerFile(t, u, 'd', 16)
		hammer(100*time.Millisecond, 8, func(_ int, stop *atomic.Bool) {
			readLoop(t, q, 'd', false, stop)
		})
		u.mu.Lock()
		dupped := q.dupped
		u.mu.Unlock()
		require.True(t, dupped, "no request went to the owner")
		require.NoError(t, f.Close())
	}()
	require.Eventually(t, func() bool {
		runtime.GC()
		return openFds(t) == fds
	}, 5*time.Second, 10*time.Millisecond, "the dropped queue's descriptor is still open")
}
