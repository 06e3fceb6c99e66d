//go:build linux

package direct

import (
	"errors"
	"io"
	"sync"
	"syscall"
	"unsafe"
)

// uringQueue runs requests through one io_uring.
//
// Concurrency model: any goroutine may Submit; a mutex serialises the SQ
// side (filling SQEs, publishing the tail, io_uring_enter to submit) and the
// table of operations in flight. One reaper goroutine per queue blocks in
// io_uring_enter(GETEVENTS), walks the CQ ring, resubmits the rest of a
// short transfer, and delivers each finished request's Completion on its
// Done channel. No SINGLE_ISSUER: submitter and reaper are different
// threads. At most Depth requests are in flight, so neither ring can
// overflow (the SQ has Depth entries, the CQ twice that).
type uringQueue struct {
	x     xfer
	r     *ring
	slots chan struct{} // a token per request in flight

	mu     sync.Mutex
	ops    []uringOp // by user_data
	free   []uint32  // indices of ops not in flight
	closed bool
	err    error // a failed io_uring_enter: the ring's state is unknown

	reaped chan struct{} // closed when the reaper exits

	// resHook, when set by a test, rewrites a CQE's result before it is
	// interpreted: the way to inject negative results and short counts.
	resHook func(r *Request, done int, res int32) int32
}

// uringOp is a request in flight and how much of it is done.
type uringOp struct {
	req     Request
	done    int
	retries int
}

// stopToken is the user_data of the NOP that tells the reaper to exit.
const stopToken = ^uint64(0)

// maxRetries bounds resubmissions after -EAGAIN or -EINTR in a CQE.
const maxRetries = 100

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
		x:      x,
		r:      r,
		slots:  make(chan struct{}, depth),
		ops:    make([]uringOp, depth),
		free:   make([]uint32, depth),
		reaped: make(chan struct{}),
	}
	for i := range q.free {
		q.free[i] = uint32(depth - 1 - i)
	}
	go q.reap()
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
	q.slots <- struct{}{}
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

func (q *uringQueue) reap() {
	defer close(q.reaped)
	stop := false
	for !stop {
		if _, err := q.r.enter(0, 1, ioringEnterGetEvents); err != nil {
			// Only a broken ring gets here; fail what is in flight.
			q.failAll(err)
			return
		}
		q.r.reap(func(userData uint64, res int32) {
			if userData == stopToken {
				stop = true
				return
			}
			q.complete(uint32(userData), res)
		})
	}
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
	if q.resHook != nil {
		res = q.resHook(&op.req, op.done, res)
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
	// Wait for every request in flight by taking every slot.
	for range cap(q.slots) {
		q.slots <- struct{}{}
	}
	q.mu.Lock()
	stopped := q.r.push(&sqe{opcode: ioringOpNop, userData: stopToken}) && q.r.submit() == nil
	q.mu.Unlock()
	if stopped {
		<-q.reaped
	}
	for range cap(q.slots) {
		<-q.slots
	}
	q.r.close()
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
