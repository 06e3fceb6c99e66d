package direct

import (
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
