package direct

import (
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// churn is an Injector that rewrites every few calls: a short transfer
// (resubmitted by the reaper), EAGAIN (retried by the reaper), or a late
// completion (delivered by a timer, which posts the wake-up NOP).
type churn struct{ n atomic.Int32 }

func (c *churn) Inject(op Op, _ int64, n int) (Fault, bool) {
	switch k := c.n.Add(1); {
	case op == OpSync:
		return Fault{}, false
	case k%7 == 0 && n > 512:
		return Fault{Short: 512}, true
	case k%11 == 0:
		return Fault{Err: syscall.EAGAIN}, true
	case k%13 == 0:
		return Fault{Delay: time.Millisecond}, true
	}
	return Fault{}, false
}

// TestURingReaperWaitsOnlyForDue checks, at every io_uring_enter that
// waits for completions, what uring's "Why waits end" promises: the
// kernel has consumed an SQE whose CQE nobody has reaped yet, so the
// wait ends when the device answers. A wait entered with nothing due
// would sleep in the kernel until some later submission, which for a
// lone appender waiting for its own write never comes. Two queues share
// a private ring; goroutines submit singly and in batches, await, and
// close side by side, while short transfers and EAGAIN are resubmitted
// from the reaper and late completions post wake-up NOPs. The check
// reads the rings' indices: SQEs consumed (SQ head) minus CQEs reaped
// (CQ head). The kernel publishes the SQ head after posting the CQEs of
// requests that completed inline, so a wait that finds nothing due
// first lets the submitters in the kernel return. (Putting the seat
// back with inKernel == 0, in leave, fails it by thousands.)
func TestURingReaperWaitsOnlyForDue(t *testing.T) {
	u, q1, f := privateQueue(t, 8)
	q2 := &uringQueue{u: u, x: newXfer(f, Alignment{Memory: 1, Offset: 1}, false), depth: 8, drained: make(chan struct{})}
	q2.x.faults = &churn{}
	sq0, cq0 := atomic.LoadUint32(u.r.sqHead), atomic.LoadUint32(u.r.cqHead)
	due := func() bool {
		consumed := atomic.LoadUint32(u.r.sqHead) - sq0
		reaped := atomic.LoadUint32(u.r.cqHead) - cq0
		return int32(consumed-reaped) > 0 || u.r.ready()
	}
	var waits, idle, submitting atomic.Int32
	u.r.testEnter = func(toSubmit, minComplete, flags uint32) (int, syscall.Errno) {
		if toSubmit > 0 {
			submitting.Add(1)
			defer submitting.Add(-1)
		}
		if flags&ioringEnterGetEvents != 0 {
			waits.Add(1)
			// Let the submissions in the kernel publish the SQ head.
			for submitting.Load() > 0 && !due() {
				time.Sleep(10 * time.Microsecond)
			}
			if !due() {
				idle.Add(1)
				return 0, syscall.EINTR // rather than sleep for good
			}
		}
		return u.r.enterKernel(toSubmit, minComplete, flags)
	}

	rounds := 150
	if testing.Short() {
		rounds = 30
	}
	var wg sync.WaitGroup
	for _, q := range []*uringQueue{q1, q2} {
		for g := range 4 {
			wg.Go(func() {
				done := make(chan Completion, 3)
				for i := range rounds {
					off := int64((g*rounds+i)%15) * 4096
					op := OpRead
					if i%2 == 0 {
						op = OpWrite
					}
					if i%5 == 0 {
						rs := []Request{
							{Op: op, Buf: make([]byte, 4096), Off: off, Token: 0, Done: done},
							{Op: op, Buf: make([]byte, 4096), Off: off + 4096, Token: 1, Done: done},
							{Op: OpSync, Token: 2, Done: done},
						}
						n, err := q.SubmitBatch(rs)
						if !assert.NoError(t, err) {
							return
						}
						for range n {
							assert.NoError(t, q.Await(done).Err)
						}
						continue
					}
					if !assert.NoError(t, q.Submit(Request{Op: op, Buf: make([]byte, 4096), Off: off, Token: uint64(i), Done: done})) {
						return
					}
					c := q.Await(done)
					assert.NoError(t, c.Err)
					assert.Equal(t, uint64(i), c.Token)
				}
			})
		}
	}
	// Close racing requests in flight: each is delivered, then Close returns.
	closer := make(chan Completion, 4)
	for k := range 4 {
		require.NoError(t, q1.Submit(Request{Op: OpRead, Buf: make([]byte, 4096), Off: int64(k) * 4096, Token: uint64(k), Done: closer}))
	}
	finished := make(chan struct{})
	go func() {
		wg.Wait()
		assert.NoError(t, q1.Close())
		assert.NoError(t, q2.Close())
		close(finished)
	}()
	select {
	case <-finished:
	case <-time.After(5 * time.Minute):
		t.Fatalf("requests or Close still waiting after 5 minutes (%d waits, %d with nothing due)", waits.Load(), idle.Load())
	}
	assert.Len(t, closer, 4, "every request in flight at Close delivered")
	assert.NotZero(t, waits.Load(), "no wait in the kernel exercised")
	t.Logf("%d waits in the kernel", waits.Load())
	assert.Zero(t, idle.Load(), "waits entered with nothing due, of %d", waits.Load())
}
