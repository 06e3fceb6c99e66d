package direct

import (
	"sync"
)

// pwriteQueue runs requests with pread, pwrite and fdatasync on Depth worker
// goroutines, so that a caller overlaps filling a buffer with the previous
// write even where io_uring is missing.
type pwriteQueue struct {
	x     xfer
	slots chan struct{} // a token per request in flight
	work  chan Request
	wg    sync.WaitGroup

	mu     sync.RWMutex // guards closed against the send to work
	closed bool
}

func newPwriteQueue(x xfer, depth int) *pwriteQueue {
	q := &pwriteQueue{x: x, slots: make(chan struct{}, depth), work: make(chan Request, depth)}
	for range depth {
		q.wg.Go(q.worker)
	}
	return q
}

func (q *pwriteQueue) worker() {
	for r := range q.work {
		c := q.x.do(r)
		<-q.slots
		r.Done <- c
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
	q.slots <- struct{}{}
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		<-q.slots
		return ErrQueueClosed
	}
	q.work <- r // never blocks: a slot guarantees room
	return nil
}

func (q *pwriteQueue) Await(done <-chan Completion) Completion { return <-done }

func (q *pwriteQueue) Depth() int         { return cap(q.slots) }
func (q *pwriteQueue) Engine() EngineKind { return EnginePwrite }

func (q *pwriteQueue) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	close(q.work)
	q.mu.Unlock()
	q.wg.Wait()
	return nil
}
