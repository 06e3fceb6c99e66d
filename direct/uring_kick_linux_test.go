package direct

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestURingOwnerKick: a Submit handed to the owner while it waits in the
// kernel leaves the wait to the next CQE only while more CQEs are due
// than SQEs wait and CQEs came recently, and the SQE then goes in with
// the turn that reaps that CQE; a stale window, or as many waiting as
// due, kicks the owner out at once. Reads of an empty pipe stand for
// requests in flight: each stays in the kernel until the test writes.
func TestURingOwnerKick(t *testing.T) {
	u := ownerRing(t)
	fq, _ := ownerFile(t, u, 'a', 8)
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	defer pr.Close()
	defer pw.Close()
	pr.Fd() // blocking: io_uring fails a read of an empty non-blocking pipe with EAGAIN
	pq := &uringQueue{u: u, x: newXfer(pr, Alignment{Memory: 1, Offset: 1}, false), depth: 8, drained: make(chan struct{})}

	// Three pipe reads in the kernel, submitted before any owner.
	pipeDone := make(chan Completion, 3)
	for k := range 3 {
		require.NoError(t, pq.Submit(Request{Op: OpRead, Buf: make([]byte, 1), Token: uint64(k), Done: pipeDone}))
	}
	// An Await takes the seat and hands it to an owner, which waits in
	// the kernel for them.
	first := make(chan Completion, 1)
	go func() { first <- pq.Await(pipeDone) }()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			u.mu.Lock()
			ok := cond()
			u.mu.Unlock()
			if ok {
				return
			}
			require.False(t, time.Now().After(deadline), what)
			time.Sleep(100 * time.Microsecond)
		}
	}
	// due lags while the owner is in the kernel: its enter is counted
	// when it returns.
	held := func(n int) func() bool {
		return func() bool { return u.ownerOn && u.ownerIn && u.readIn() && len(u.ops)-len(u.free) == n }
	}
	waitFor("the owner waiting in the kernel", held(3))

	fileRead := func(k uint64, done chan Completion) {
		t.Helper()
		require.NoError(t, fq.Submit(Request{Op: OpRead, Buf: make([]byte, 4096), Off: 4096, Token: k, Done: done}))
	}
	arrives := func(done chan Completion, within time.Duration) bool {
		select {
		case c := <-done:
			require.NoError(t, c.Err)
			assert.Equal(t, 4096, c.N)
			return true
		case <-time.After(within):
			return false
		}
	}

	// CQEs came just now and more are due: one SQE waits for the next
	// CQE.
	u.mu.Lock()
	u.kickAfter = time.Hour
	u.lastCQE = monotonic()
	u.mu.Unlock()
	done := make(chan Completion, 2)
	fileRead(1, done)
	assert.False(t, arrives(done, 50*time.Millisecond), "the owner was kicked with more CQEs due than SQEs waiting, and CQEs coming")
	_, err = pw.Write([]byte{1})
	require.NoError(t, err)
	assert.True(t, arrives(done, 5*time.Second), "the SQE did not go in with the turn that reaped a CQE")
	require.NoError(t, (<-first).Err)
	waitFor("the owner back in the kernel", held(2))

	// As many waiting as due: the second SQE kicks.
	u.mu.Lock()
	u.lastCQE = monotonic()
	u.mu.Unlock()
	fileRead(2, done)
	fileRead(3, done)
	for range 2 {
		assert.True(t, arrives(done, 5*time.Second), "2 SQEs waiting behind 2 due CQEs, and no kick")
	}
	waitFor("the owner back in the kernel", held(2))

	// CQEs went quiet (a slow fdatasync in flight): one SQE kicks.
	u.mu.Lock()
	u.kickAfter = 0
	u.mu.Unlock()
	fileRead(4, done)
	assert.True(t, arrives(done, 5*time.Second), "no kick with the requests in flight quiet")

	_, err = pw.Write([]byte{1, 2})
	require.NoError(t, err)
	for range 2 {
		require.NoError(t, pq.Await(pipeDone).Err)
	}
	require.NoError(t, pq.Close())
	require.NoError(t, fq.Close())
}
