//go:build linux

package direct

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// uringQueue runs requests through one io_uring.
//
// Concurrency model: any goroutine may Submit and Await. A mutex serialises
// the SQ side (filling SQEs, publishing the tail, io_uring_enter to submit)
// and the table of operations in flight. There is no reaper goroutine: the
// goroutines waiting in Await (or in Submit for a free slot) take turns as
// the reaper, one at a time, blocking in io_uring_enter(GETEVENTS) and
// delivering every CQE they find to its request's Done channel; the others
// wait on a condition variable until the reaper leaves. So, as with fio and
// liburing's own loop, a completion wakes the very thread that waits for
// it: no hop through a second thread. No SINGLE_ISSUER, since submitter and
// reaper may be different threads. At most Depth requests are in flight, so
// neither ring can overflow (the SQ has Depth entries, the CQ twice that).
type uringQueue struct {
	x     xfer
	r     *ring
	slots chan struct{} // a token per request in flight

	mu     sync.Mutex
	ops    []uringOp // by user_data
	free   []uint32  // indices of ops not in flight
	closed bool
	err    error // a failed io_uring_enter: the ring's state is unknown

	fixed    [][]byte // registered buffers, by index
	fixedOps int      // requests issued with READ_FIXED or WRITE_FIXED

	rmu     sync.Mutex // guards reaping
	reaping bool
	turn    *sync.Cond // signalled when a reaper leaves
}

// uringOp is a request in flight and how much of it is done.
type uringOp struct {
	req     Request
	done    int
	retries int
}

func newURingQueue(x xfer, depth int) (Queue, error) {
	r, err := newRing(uint32(depth))
	if err != nil {
		return nil, err
	}
	if err := r.supports(ioringOpRead, ioringOpWrite, ioringOpFsync, ioringOpNop); err != nil {
		r.close()
		return nil, err
	}
	q := &uringQueue{
		x:     x,
		r:     r,
		slots: make(chan struct{}, depth),
		ops:   make([]uringOp, depth),
		free:  make([]uint32, depth),
	}
	q.turn = sync.NewCond(&q.rmu)
	for i := range q.free {
		q.free[i] = uint32(depth - 1 - i)
	}
	return q, nil
}

// URingError reports why EngineAuto would not use io_uring (setup refused
// by the kernel, a sandbox or kernel.io_uring_disabled, or a missing
// opcode), or nil when it would. It sets up and tears down a small ring.
func URingError() error {
	r, err := newRing(1)
	if err != nil {
		return err
	}
	defer r.close()
	return r.supports(ioringOpRead, ioringOpWrite, ioringOpFsync, ioringOpNop)
}

func (q *uringQueue) Depth() int         { return cap(q.slots) }
func (q *uringQueue) Engine() EngineKind { return EngineURing }

func (q *uringQueue) Submit(r Request) error {
	if err := q.x.validate(r); err != nil {
		return err
	}
	for {
		select {
		case q.slots <- struct{}{}:
			return q.submit(r)
		default:
			// Every slot is in flight: reap until one frees.
			if err := q.progress(func() bool { return len(q.slots) < cap(q.slots) }); err != nil {
				return err
			}
		}
	}
}

func (q *uringQueue) submit(r Request) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.err != nil {
		<-q.slots
		if q.closed {
			return ErrQueueClosed
		}
		return q.err
	}
	i := q.free[len(q.free)-1]
	q.free = q.free[:len(q.free)-1]
	q.ops[i] = uringOp{req: r}
	if err := q.start(i); err != nil {
		q.ops[i] = uringOp{}
		q.free = append(q.free, i)
		<-q.slots
		return err
	}
	return nil
}

func (q *uringQueue) Await(done <-chan Completion) Completion {
	for {
		select {
		case c := <-done:
			return c
		default:
		}
		if err := q.progress(func() bool { return len(done) > 0 }); err != nil {
			select {
			case c := <-done:
				return c
			default:
				return Completion{Err: err} // a broken or closed ring: nothing will come
			}
		}
	}
}

// start pushes and submits the SQE for what remains of op i. q.mu is held.
func (q *uringQueue) start(i uint32) error {
	op := &q.ops[i]
	s := sqe{fd: int32(q.x.f.Fd()), userData: uint64(i)}
	switch op.req.Op {
	case OpWrite, OpRead:
		s.opcode = ioringOpWrite
		if op.req.Op == OpRead {
			s.opcode = ioringOpRead
		}
		rest := op.req.Buf[op.done:]
		if len(rest) > 0 {
			s.addr = uint64(uintptr(unsafe.Pointer(&rest[0])))
			if i, ok := q.fixedIndex(rest); ok {
				s.opcode, s.bufIndex = ioringOpWriteFixed, uint16(i)
				if op.req.Op == OpRead {
					s.opcode = ioringOpReadFixed
				}
				q.fixedOps++
			}
		}
		if op.req.Op == OpWrite {
			s.opFlags = uint32(q.x.writeFlags)
		}
		s.len = uint32(len(rest))
		s.off = uint64(op.req.Off) + uint64(op.done)
	case OpSync:
		s.opcode = ioringOpFsync
		s.opFlags = ioringFsyncDatasync
	}
	if !q.r.push(&s) {
		// Cannot happen while Depth bounds the requests in flight.
		return errors.New("direct: io_uring submission queue full")
	}
	if err := q.r.submit(); err != nil {
		q.err = err
		return err
	}
	return nil
}

// RegisterBuffers registers bufs with the ring as fixed buffers: the
// kernel pins them once instead of on every request, and requests whose
// Buf lies inside one use READ_FIXED and WRITE_FIXED on their own. Without
// CAP_IPC_LOCK the pinned memory counts against RLIMIT_MEMLOCK, and a
// refusal (ENOMEM) leaves the queue working with plain requests.
func (q *uringQueue) RegisterBuffers(bufs [][]byte) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.fixed != nil {
		return errors.New("direct: buffers already registered")
	}
	if len(bufs) == 0 || len(bufs) > 1<<14 {
		return fmt.Errorf("direct: cannot register %d buffers", len(bufs))
	}
	if err := q.r.registerBuffers(bufs); err != nil {
		return err
	}
	q.fixed = bufs
	return nil
}

// fixedIndex returns the registered buffer that holds all of p.
func (q *uringQueue) fixedIndex(p []byte) (int, bool) {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	for i, b := range q.fixed {
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		if start >= lo && start+uintptr(len(p)) <= lo+uintptr(len(b)) {
			return i, true
		}
	}
	return 0, false
}

// progress reaps completions until ready reports true. One goroutine at a
// time reaps; the others wait for it to leave and look again. It returns
// the error of a ring that can no longer deliver (broken, or closed).
func (q *uringQueue) progress(ready func() bool) error {
	q.rmu.Lock()
	defer q.rmu.Unlock()
	for !ready() {
		if q.reaping {
			q.turn.Wait()
			continue
		}
		if q.r.fd < 0 {
			return ErrQueueClosed
		}
		q.reaping = true
		q.rmu.Unlock()
		err := q.reapOnce()
		q.rmu.Lock()
		q.reaping = false
		q.turn.Broadcast()
		if err != nil {
			return err
		}
	}
	return nil
}

// reapOnce waits for at least one completion and delivers every one
// available.
func (q *uringQueue) reapOnce() error {
	if _, err := q.r.enter(0, 1, ioringEnterGetEvents); err != nil {
		q.failAll(err) // only a broken ring gets here
		return err
	}
	q.r.reap(func(userData uint64, res int32) { q.complete(uint32(userData), res) })
	return nil
}

// complete interprets one CQE: resubmits the rest of a short transfer or a
// retryable failure, and otherwise finishes the request.
func (q *uringQueue) complete(i uint32, res int32) {
	q.mu.Lock()
	op := &q.ops[i]
	if op.req.Done == nil {
		// A CQE for an SQE whose submission reported failure.
		q.mu.Unlock()
		return
	}
	if q.x.faults != nil {
		// The transfer happened; the fault rewrites what it reports, and
		// the code below reacts as to a real one.
		if f, ok := q.x.faults.Inject(op.req.Op, op.req.Off+int64(op.done), len(op.req.Buf)-op.done); ok {
			time.Sleep(f.Delay)
			switch {
			case f.Err != 0:
				res = -int32(f.Err)
			case f.Short > 0 && res > int32(f.Short):
				res = int32(f.Short)
			}
		}
	}
	var err error
	switch {
	case res == -int32(syscall.EAGAIN) || res == -int32(syscall.EINTR):
		if op.retries++; op.retries <= maxRetries {
			if err = q.start(i); err == nil {
				q.mu.Unlock()
				return
			}
		} else {
			err = q.x.wrap(op.req.Op.syscall(), syscall.Errno(-res))
		}
	case res < 0:
		err = q.x.wrap(op.req.Op.syscall(), syscall.Errno(-res))
	case op.req.Op != OpSync:
		op.done += int(res)
		rest := len(op.req.Buf) - op.done
		switch {
		case rest <= 0:
		case res == 0 && op.req.Op == OpRead:
			err = io.EOF
		case res == 0, op.done%q.x.align.Offset != 0:
			// A direct transfer cut off the alignment cannot be resumed:
			// for a read that is the end of the file.
			if op.req.Op == OpRead {
				err = io.EOF
			} else {
				err = q.x.wrap("pwrite", io.ErrShortWrite)
			}
		default:
			if err = q.start(i); err == nil {
				q.mu.Unlock()
				return
			}
		}
	}
	c := Completion{Token: op.req.Token, Op: op.req.Op, N: op.done, Err: err}
	done := op.req.Done
	q.ops[i] = uringOp{} // drop the buffer reference
	q.free = append(q.free, i)
	q.mu.Unlock()
	<-q.slots
	done <- c
}

// failAll completes every request in flight with err.
func (q *uringQueue) failAll(err error) {
	q.mu.Lock()
	q.err = err
	idle := make([]bool, len(q.ops))
	for _, i := range q.free {
		idle[i] = true
	}
	var pending []uringOp
	for i := range q.ops {
		if !idle[i] {
			pending = append(pending, q.ops[i])
			q.ops[i] = uringOp{}
			q.free = append(q.free, uint32(i))
		}
	}
	q.mu.Unlock()
	for _, op := range pending {
		<-q.slots
		op.req.Done <- Completion{Token: op.req.Token, Op: op.req.Op, N: op.done, Err: err}
	}
}

func (q *uringQueue) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	q.mu.Unlock()
	// Reap until nothing is in flight. A broken ring has failed them all.
	_ = q.progress(func() bool { return len(q.slots) == 0 })
	q.rmu.Lock()
	for q.reaping {
		q.turn.Wait()
	}
	q.r.close()
	q.rmu.Unlock()
	return nil
}

// syscall names the operation in errors, as the pwrite engine does.
func (o Op) syscall() string {
	switch o {
	case OpWrite:
		return "pwrite"
	case OpRead:
		return "pread"
	}
	return "fdatasync"
}
