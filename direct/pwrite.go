package direct

import (
	"sync"
)

// pwriteQueue runs requests with pread, pwrite and fdatasync on Depth worker
// goroutines, so that a caller overlaps filling a buffer with the previous
// write even where io_uring is missing.
//
// mu guards the count of requests accepted and not yet delivered, and
// closed; Submit counts a request and hands it to work under mu, so Close
// (which closes work under mu) never races a send, and a refused Submit
// counts nothing. A worker sends the Completion to Done before it counts
// the request off, so Close, which waits for the workers, returns with
// every completion delivered.
type pwriteQueue struct {
	x     xfer
	depth int
	work  chan Request // room for depth: a counted request never blocks the send
	wg    sync.WaitGroup

	mu      sync.Mutex
	room    sync.Cond // on mu: a request was delivered, or the queue closed
	pending int
	closed  bool
	drained chan struct{} // closed once closed and nothing is pending
}

func newPwriteQueue(x xfer, depth int) *pwriteQueue {
	q := &pwriteQueue{x: x, depth: depth, work: make(chan Request, depth), drained: make(chan struct{})}
	q.room.L = &q.mu
	for range depth {
		q.wg.Go(q.worker)
	}
	return q
}

func (q *pwriteQueue) worker() {
	for r := range q.work {
		c := q.x.do(r)
		q.x.queued(-1)
		r.Done <- c
		q.mu.Lock()
		q.pending--
		if q.closed && q.pending == 0 {
			close(q.drained)
		}
		q.room.Broadcast()
		q.mu.Unlock()
	}
}

// do performs r synchronously.
func (x *xfer) do(r Request) Completion {
	c := Completion{Token: r.Token, Op: r.Op}
	switch r.Op {
	case OpWrite:
		c.N, c.Err = x.writeAt(r.Buf, r.Off)
	case OpRead:
		c.N, c.Err = x.readAt(r.Buf, r.Off)
	case OpSync:
		c.Err = x.sync()
	}
	return c
}

func (q *pwriteQueue) Submit(r Request) error {
	if err := q.x.validate(r); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for !q.closed && q.pending >= q.depth {
		q.room.Wait()
	}
	if q.closed {
		return ErrQueueClosed
	}
	q.pending++
	q.x.queued(1)
	q.work <- r
	return nil
}

// Await receives from done. On a closed queue with nothing outstanding it
// returns a Completion of no request (Op 0, Err ErrQueueClosed) instead
// of blocking forever.
func (q *pwriteQueue) Await(done <-chan Completion) Completion {
	select {
	case c := <-done:
		return c
	case <-q.drained:
		select {
		case c := <-done:
			return c
		default:
			return Completion{Err: ErrQueueClosed}
		}
	}
}

func (q *pwriteQueue) Depth() int         { return q.depth }
func (q *pwriteQueue) Engine() EngineKind { return EnginePwrite }

func (q *pwriteQueue) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	close(q.work)
	if q.pending == 0 {
		close(q.drained)
	}
	q.room.Broadcast()
	q.mu.Unlock()
	q.wg.Wait()
	return nil
}
