//go:build linux

package direct

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The process's rings.
//
// A service has thousands of files open; a ring per file (or per queue)
// would cost each an fd, locked memory and an io_uring_setup. So every
// queue of every file submits to one of a few rings shared by the whole
// process (Neon's tokio-epoll-uring and RocksDB keep a ring per thread for
// the same reason). io_uring takes the file descriptor in each SQE, so a
// ring serves any file. The first ring is set up by the probe, once per
// process; more are set up lazily, up to maxRings, when every ring already
// serves a queue; they live as long as the process, like Go's own netpoll
// descriptor.

// ringEntries is the size of each shared ring's submission queue. A ring
// runs at most ringEntries-2 requests, one wake-up NOP and the owner's
// eventfd read (see own), so every SQE
// pushed and not yet consumed has a slot; the kernel gives the CQ twice
// as many entries (IORING_SETUP_CQSIZE unset), so it cannot overflow. 256 requests is more than the
// queue depths a disk rewards (fio's knee is at QD 32-128) times a few
// queues; 16 KiB of SQEs and 8 KiB of CQEs.
const ringEntries = 256

// maxRings bounds the process's rings: one per P, as a ring per thread
// would, but at most 4, since one ring already takes far more requests
// than a disk overlaps and each costs an fd and locked memory.
func maxRings() int { return min(runtime.GOMAXPROCS(0), 4) }

// drainLimit bounds how long a broken ring waits for the kernel to finish
// the requests it holds before reporting them failed (see uring.drain).
// File I/O completes in milliseconds; a request still held after this is
// stuck in the device, and Close must return.
const drainLimit = 10 * time.Second

// rings is the process's set of shared rings. It is the one piece of
// package state: rings are a process resource, as the kernel counts them.
var rings ringSet

type ringSet struct {
	probeOnce sync.Once
	probeErr  error // why io_uring is out, or nil

	mu      sync.Mutex
	live    []*uring // not broken; the first is the probe's
	created int      // rings ever set up, for tests
}

// probe sets up the first ring and checks the opcodes, once per process.
func (s *ringSet) probe() error {
	s.probeOnce.Do(func() {
		u, err := newURing()
		if err != nil {
			s.probeErr = err
			return
		}
		s.mu.Lock()
		s.live = append(s.live, u)
		s.created++
		s.mu.Unlock()
	})
	return s.probeErr
}

// get returns the ring a new queue should use: the one serving the fewest
// queues, or a new one while every ring serves some and there are fewer
// than maxRings.
func (s *ringSet) get() (*uring, error) {
	if err := s.probe(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var best *uring
	for _, u := range s.live {
		if best == nil || u.queues < best.queues {
			best = u
		}
	}
	if best == nil || best.queues > 0 && len(s.live) < maxRings() {
		u, err := newURing()
		switch {
		case err == nil:
			s.live = append(s.live, u)
			s.created++
			best = u
		case best == nil:
			return nil, err
		}
		// Else share a busy ring rather than fail.
	}
	best.queues++
	return best, nil
}

// put returns a queue's claim on u.
func (s *ringSet) put(u *uring) {
	s.mu.Lock()
	u.queues--
	s.mu.Unlock()
}

// retire removes a broken ring, so that new queues get a working one.
func (s *ringSet) retire(u *uring) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, v := range s.live {
		if v == u {
			s.live = append(s.live[:i], s.live[i+1:]...)
			return
		}
	}
}

// uring is one shared ring and the requests it runs, for any number of
// queues over any number of files.
//
// Concurrency model. One mutex, mu, guards pushing to the SQ, the table
// of requests (ops, free, gens), the counts, and every queue's state on
// this ring (uringQueue.pending, closed). It is never held across a
// system call. A submitter pushes its SQE under mu, drops it and calls
// io_uring_enter offering every SQE pushed, unless another submitter's
// call took its SQE along in the meantime. Submitters enter the kernel
// side by side, holding smu for reading; the kernel serialises them on
// its own ring lock, which spins while its holder runs. Queueing them on
// a Go mutex instead (flat combining, one enter at a time) parked every
// late submitter until the one in the kernel came out and was scheduled
// again, and the requests they would submit next waited with them: 16
// readers ran 0.78x fio's reads of the same spans that way, 0.86x
// entering side by side (with the poller's wait, below). smu is held for
// writing only to withdraw SQEs the kernel refused, and by drain, so that
// no one is in the kernel then. Reapers and deliveries, which need mu
// only, never wait for a submission. Lock order: smu, then mu. There is
// no reaper goroutine: a goroutine that must wait (in Await, in Submit
// for room, in Close for its requests) takes the reaper's seat when it is
// free, drops mu, waits for a CQE (parked in Go's poller on the ring's
// descriptor while more goroutines wait than Ps run, else blocked in
// io_uring_enter; see ring.wait) and delivers every CQE it finds, to
// whichever queue's request it belongs, then gives the seat up. Only the
// seat's holder touches the CQ, so the CQ needs no lock. Nothing runs
// while nobody waits. While more goroutines wait than Ps run, the seat
// goes to an owner goroutine on a thread of its own, which submits what
// the others push and reaps (see own, in uring_owner_linux.go).
//
// The seat is a token in the channel seat: it is there exactly when no
// one reaps and the kernel holds requests (inKernel > 0); with nothing in
// the kernel it is parked, and the submission that puts something there
// brings it back. An Await selects on its Done channel and on the seat,
// so a Completion sent to Done wakes it directly, with no broadcast to
// every waiter; Submit and Close, which wait for counts, sleep on the
// condition variable wake, broadcast whenever a count or the seat changes.
//
// Why waits end: a reaper waits for a CQE only with inKernel > 0, so
// a CQE is due. A waiter sleeps only while someone else reaps (who gives
// the seat back or parks it when the kernel is empty, and broadcasts), or
// while the kernel holds nothing of the ring; then whatever it waits for
// comes from a delayed fault's timer, a Close or a submission, each of
// which wakes it. The counts are taken under mu when a request is
// accepted, so a refused Submit leaves none behind. inKernel counts a
// request once the enter that submitted it returns, so it may lag (and a
// reaper that sees the CQE first may take it below the truth, even below
// zero), but never exceeds what the kernel holds: a reaper waits only
// for a CQE that is due. A timer that delivers while a reaper may be
// waiting posts a NOP to wake it.
type uring struct {
	r       *ring
	ctl     func(fd uintptr) // u.push bound once: RawConn.Control's argument, without an allocation per call
	queues  int              // queues using the ring; guarded by rings.mu
	waiters atomic.Int32     // goroutines in Await: reap parks while more than GOMAXPROCS

	smu sync.RWMutex // read: held across the io_uring_enter calls that submit; write: to withdraw, and to drain

	mu        sync.Mutex
	wake      sync.Cond     // on mu: the reaper left, a request was delivered or submitted, a queue closed
	ops       []uringOp     // by user_data
	gens      []uint32      // by user_data: pushes of the op's SQE so far, so that a submitter knows its own
	free      []uint32      // indices of idle ops
	inKernel  int           // SQEs the kernel holds: submitted (and counted), CQE not yet reaped
	seat      chan struct{} // the reaper's seat: a token while it is free and the kernel holds requests
	parked    bool          // the token is neither in seat nor held: nothing is in the kernel
	nopQueued bool          // a wake-up NOP is in the kernel
	err       error         // the ring broke: no more submissions; set once
	broken    chan struct{} // closed once the broken ring is drained
	ownerOn   bool          // an owner holds the seat and submits what is pushed (see own)
	ownerIn   bool          // the owner is in io_uring_enter: submitters kick it, or submit themselves
	efd       int           // the eventfd that kicks the owner out of the kernel
	evbuf     [8]byte       // what the owner's read of efd reads
	armed     bool          // the owner's read of efd is pushed or in the kernel
	kicked    bool          // efd was written since the read was armed
	armSeq    uint32        // the read is the armSeq-th SQE pushed
	armIn     bool          // the armed read was seen consumed (see readIn)
	cur       uint32        // the op push is to submit
	curErr    error         // what push made of it
	lastCQE   int64         // monotonic: when a reaper last found CQEs (see kickWanted)
	kickAfter time.Duration // kickWindow, or what a test sets
	testFail  func() error  // test hook: called instead of waiting in the kernel
	testOwner bool          // test hook: an owner whenever an Await takes the seat

	eng *engineRec // the statistics of the ring's own shard: enters, reaps, rings
}

var errSQFull = errors.New("direct: io_uring submission queue full")

// nopData is the user_data of the wake-up NOP, outside the op indices.
const nopData = ^uint64(0)

// op states.
const (
	opIdle   = iota
	opKernel // its SQE is in the kernel
	opHeld   // its CQE was reaped; a reaper or a fault's timer owns it
)

// uringOp is a request on the ring and how much of it is done.
type uringOp struct {
	q       *uringQueue
	req     Request
	tick    tick // its start, for the statistics and the slow watch
	state   uint8
	done    int
	retries int
	resumed int   // resubmissions of a short transfer's rest
	refused error // its SQE was withdrawn, not consumed: why (its submitter handles it)
	handed  bool  // its SQE was left to the owner: no submitter waits for it (see own)
}

func newURing() (*uring, error) {
	r, err := newRing(ringEntries)
	if err != nil {
		return nil, err
	}
	if err := r.supports(ioringOpRead, ioringOpWrite, ioringOpFsync, ioringOpNop); err != nil {
		r.close()
		return nil, err
	}
	const ops = ringEntries - 2 // and a NOP and the owner's eventfd read
	u := &uring{r: r, ops: make([]uringOp, ops), gens: make([]uint32, ops), free: make([]uint32, ops), seat: make(chan struct{}, 1), parked: true, broken: make(chan struct{}), lastCQE: monotonic(), kickAfter: kickWindow}
	// Non-blocking, so that the kernel polls it rather than park an
	// io-wq worker in its read. Without it there is no owner.
	u.efd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		u.efd = -1
	}
	u.wake.L = &u.mu
	u.ctl = u.push
	u.eng = &registry[pickShard()].engine
	u.r.eng = u.eng
	u.eng.rings.Add(1)
	for i := range u.free {
		u.free[i] = uint32(ops - 1 - i)
	}
	return u, nil
}

// start submits what remains of op i, with mu held; mu is released and
// taken again inside, while the SQE goes to the kernel, so the caller
// must not rely on anything mu guards across the call. On success the op
// may be complete and delivered already when start returns; on failure it
// is still the caller's, and nothing of it is counted in the kernel.
//
// The file descriptor is used inside RawConn.Control, which holds
// os.File's reference: a Close racing it waits for the call to return
// before the number is freed. Control returns only once the SQE has been
// consumed by the kernel or withdrawn, which is enough for io_uring: it
// resolves the descriptor to its file inside io_uring_enter (io_submit_sqe
// → io_issue_sqe → io_assign_file, inline, since dio sets no IOSQE_ASYNC,
// link or drain flag) and keeps that file referenced until the request
// completes. A file already closed fails with os.ErrClosed, and nothing
// is submitted.
func (u *uring) start(i uint32) error {
	op := &u.ops[i]
	u.cur = i
	if err := op.q.x.rc.Control(u.ctl); err != nil {
		return op.q.x.wrap(op.req.Op, op.req.Op.uringOp(), os.ErrClosed)
	}
	return u.curErr // set by push, under mu held since
}

// unpark brings the seat's token back once the kernel holds something,
// with mu held, and wakes the waiters that sleep for it.
func (u *uring) unpark() {
	if u.parked {
		u.parked = false
		u.seat <- struct{}{}
		u.wake.Broadcast()
	}
}

// push fills and pushes the SQE for op u.cur on descriptor fd, then has it
// submitted; it runs inside RawConn.Control, called with mu held, and
// returns with mu held, having released it while submitting. What came
// of it goes to u.curErr, which start reads before mu is released again
// (op itself may be someone else's by then).
func (u *uring) push(fd uintptr) {
	i := u.cur
	op := &u.ops[i]
	handed := u.handing(op, fd)
	if handed {
		fd = uintptr(op.q.ofd)
	}
	s := u.sqeFor(i, fd)
	if !u.r.push(&s) {
		// Cannot happen: the SQ has a slot for every op, the NOP and
		// the owner's eventfd read.
		u.curErr = errSQFull
		return
	}
	op.state = opKernel
	u.gens[i]++
	// A resubmission of a handed-off request is its resubmitter's to
	// submit, and a withdraw's refusal goes to it, not to failHanded.
	op.handed = handed
	if handed {
		// The owner submits it: kick it if it waits in the kernel
		// and no CQE will end that wait soon enough (see kickWanted).
		if u.ownerIn && !u.kicked && u.kickWanted() {
			u.kicked = true
			efd := u.efd
			u.mu.Unlock()
			u.kick(efd)
			u.mu.Lock()
		}
		// Set once mu is ours again: while it was released another
		// push may have set curErr for its own start.
		u.curErr = nil
		return
	}
	gen, seq := u.gens[i], u.r.pushed()
	u.mu.Unlock()
	err := u.flush(int64(i), gen, seq)
	u.mu.Lock()
	u.curErr = err
}

// flush makes sure the SQE pushed as the seq-th, for op i at generation
// gen, is consumed by the kernel or withdrawn, without mu; with i < 0 it
// does the same for the NOP pushed as the seq-th. Unless another
// submitter took it along already, it submits every SQE pushed, beside
// other submitters (see uring); if the kernel refuses, it withdraws what
// is still pushed, alone. It returns why the SQE was withdrawn, or nil.
func (u *uring) flush(i int64, gen, seq uint32) error {
	done, err := u.submitBeside(i, gen, seq)
	if done {
		return err
	}
	// Withdraw what is still pushed, alone: no one else is in the kernel.
	u.smu.Lock()
	u.mu.Lock()
	var handed []uint32
	done, why := u.settled(i, gen, seq)
	if !done {
		handed = u.withdraw(err)
		_, why = u.settled(i, gen, seq)
	}
	u.mu.Unlock()
	u.smu.Unlock()
	u.failHanded(handed, err)
	if ringGone(err) {
		u.breakDown(err)
	}
	return why
}

// breakDown breaks and drains u for a submitter whose io_uring_enter
// failed with an error that leaves the ring unusable (ringGone). Only a
// reaper's failed wait used to break a ring, and a reaper waits only
// while the kernel holds requests: with every enter failing nothing got
// there, so the ring stayed in service and failed every request of
// every queue given it. drain needs the reaper's seat: breakDown takes
// it (free, or parked with nothing in the kernel), unless another breaks
// the ring first. No lock is held.
func (u *uring) breakDown(cause error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for u.err == nil {
		if u.parked {
			u.parked = false
		} else {
			select {
			case <-u.seat:
			default:
				u.wake.Wait() // the reaper leaves the seat, or breaks the ring
				continue
			}
		}
		u.mu.Unlock()
		u.drain(cause)
		u.mu.Lock()
		u.leave()
	}
}

// submitBeside is flush's part under smu held for reading, beside other
// submitters: it reports whether flush's SQE is settled (and settled's
// error), or else why the kernel refused it.
func (u *uring) submitBeside(i int64, gen, seq uint32) (bool, error) {
	u.smu.RLock()
	defer u.smu.RUnlock()
	u.mu.Lock()
	defer u.mu.Unlock()
	if done, err := u.settled(i, gen, seq); done {
		return true, err
	}
	if u.err != nil {
		return false, u.err
	}
	u.mu.Unlock()
	n, err := u.r.submit(seq)
	u.mu.Lock()
	if u.count(n); u.due() > 0 {
		u.unpark()
	}
	if err != nil {
		return false, err
	}
	_, err = u.settled(i, gen, seq) // consumed: submit left nothing pushed before it unconsumed
	return true, err
}

// settled reports, with mu held, whether flush's SQE is consumed or
// withdrawn, and if withdrawn why.
func (u *uring) settled(i int64, gen, seq uint32) (bool, error) {
	switch {
	case i < 0 && !u.nopQueued:
		return true, nil // the NOP was reaped, or withdrawn
	case i < 0:
	case u.gens[i] != gen:
		return true, nil // consumed, completed and pushed again since
	case u.ops[i].refused != nil:
		return true, u.ops[i].refused
	}
	if u.r.fd < 0 {
		return true, nil // the ring broke, and withdrew what it had not consumed
	}
	return u.r.consumed(seq), nil
}

// withdraw takes back every SQE the kernel has not consumed, with smu and
// mu held: each op's submitter finds err in op.refused and handles it; a
// NOP is simply gone. It returns the ops handed off to the owner, whose
// submitters do not wait: the caller completes them with err, through
// failHanded, once it has released the locks.
func (u *uring) withdraw(err error) (handed []uint32) {
	u.r.rewind(func(userData uint64) {
		if userData == evData {
			u.armed = false
			return
		}
		if userData == nopData {
			u.nopQueued = false
			return
		}
		if op := &u.ops[userData]; op.handed {
			op.state = opHeld
			handed = append(handed, uint32(userData))
			return
		}
		u.ops[userData].refused = err
	})
	u.wake.Broadcast()
	return handed
}

// step makes the ring progress for a goroutine that waits for a count,
// with mu held (released and taken again inside): it takes the seat when
// the token is there and reaps once, and otherwise sleeps until woken.
// The caller loops, checking what it waits for under mu.
func (u *uring) step() {
	select {
	case <-u.seat:
		u.mu.Unlock()
		u.reap()
		u.mu.Lock()
	default:
		u.wake.Wait()
	}
}

// reap runs one turn in the seat, whose token the caller has taken, with
// mu not held: it waits for at least one CQE and handles
// every CQE there is, then gives the seat up. If the ring breaks it
// drains it instead.
func (u *uring) reap() {
	u.mu.Lock()
	fail := u.testFail
	u.mu.Unlock()
	var err error
	if fail != nil {
		err = fail()
	} else {
		// Park when more goroutines wait than can run at once: the
		// ones this turn wakes must not wait for this thread's P.
		err = u.r.wait(u.waiters.Load() > int32(runtime.GOMAXPROCS(0)))
	}
	if err != nil {
		u.drain(err)
	} else {
		u.reapAll()
	}
	u.mu.Lock()
	u.leave()
	u.mu.Unlock()
}

// leave gives the seat's token up, with mu held: back into seat while the
// kernel holds requests, else parked.
func (u *uring) leave() {
	if u.err == nil && u.due() > 0 {
		u.seat <- struct{}{}
	} else {
		u.parked = true
	}
	u.wake.Broadcast()
}

// reapBatch is how many CQEs reapAll handles under each hold of mu.
const reapBatch = 64

// reapAll handles the CQEs there are, in the reaper's seat (or the
// owner's), without mu, reapBatch at a time: one hold of mu counts a
// batch off the kernel, one frees the slots of the requests it completes
// and one counts those off their queues, around the sends to their Done
// channels. Taking mu three times for each CQE, as it once did, made the
// owner, which reaps for many goroutines, contend with every Submit.
func (u *uring) reapAll() {
	var buf [reapBatch]cqe
	var fin [reapBatch]finished
	reaped := 0
	defer func() {
		if reaped > 0 {
			u.eng.woke(reaped)
		}
	}()
	for {
		n := u.r.take(buf[:])
		if n == 0 {
			return
		}
		reaped += n
		u.mu.Lock()
		u.inKernel -= n
		now := monotonic() // the kick rule's, and the batch's end for the statistics
		u.lastCQE = now
		for _, c := range buf[:n] {
			switch c.userData {
			case evData:
				u.armed, u.kicked = false, false
			case nopData:
				u.nopQueued = false
			default:
				u.ops[c.userData].state = opHeld
			}
		}
		u.mu.Unlock()
		// The ops are ours until delivered or resubmitted: no one else
		// touches an op in opHeld.
		k := 0
		for _, c := range buf[:n] {
			if c.userData == evData || c.userData == nopData {
				continue
			}
			i := uint32(c.userData)
			res, now := u.inject(i, c.res)
			if !now {
				continue
			}
			err, again := u.ops[i].outcome(res)
			if again {
				if err = u.resubmit(i); err == nil {
					continue
				}
			}
			fin[k] = finished{i, err}
			k++
		}
		u.deliverAll(fin[:k], now)
		if n < len(buf) {
			return
		}
	}
}

// finished is a request reapAll completes, and its error.
type finished struct {
	i   uint32
	err error
}

// inject has op i's fault, if its queue injects any, rewrite what the
// kernel reported, res. A late fault finishes the op on a timer, so that
// neither the reaper nor any lock waits out the delay: inject then
// reports false, and the op is the timer's.
func (u *uring) inject(i uint32, res int32) (int32, bool) {
	op := &u.ops[i]
	f := op.q.x.faults
	if f == nil {
		return res, true
	}
	// The transfer happened; the fault rewrites what it reports.
	ft, ok := f.Inject(op.req.Op, op.req.Off+int64(op.done), len(op.req.Buf)-op.done)
	if !ok {
		return res, true
	}
	switch {
	case ft.Err != 0:
		res = -int32(ft.Err)
	case ft.Short > 0 && res > int32(ft.Short):
		res = int32(ft.Short)
	}
	if ft.Delay > 0 {
		time.AfterFunc(ft.Delay, func() { u.finish(i, res, true) })
		return 0, false
	}
	return res, true
}

// finish interprets the result of op i, which it owns: it resubmits the
// rest of a short transfer or a retryable failure, and otherwise delivers
// the Completion. late says it runs on a fault's timer, not in the reaper.
func (u *uring) finish(i uint32, res int32, late bool) {
	err, again := u.ops[i].outcome(res)
	if again {
		if err = u.resubmit(i); err == nil {
			return
		}
	}
	u.deliver(i, err, late)
}

// resubmit submits the rest of op i, which its caller owns, and reports
// why it could not (the op is then still the caller's, to deliver).
func (u *uring) resubmit(i uint32) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.err != nil {
		return u.err
	}
	return u.start(i)
}

// deliverAll completes the ops of fin, as deliver does one, taking mu
// twice for them all; now is when their CQEs were taken.
func (u *uring) deliverAll(fin []finished, now int64) {
	if len(fin) == 0 {
		return
	}
	var out [reapBatch]struct {
		c       Completion
		done    chan<- Completion
		q       *uringQueue
		tick    tick
		retries int
	}
	u.mu.Lock()
	for k, f := range fin {
		op := &u.ops[f.i]
		out[k].c = Completion{Token: op.req.Token, Op: op.req.Op, N: op.done, Err: f.err}
		out[k].done, out[k].q = op.req.Done, op.q
		out[k].tick, out[k].retries = op.tick, op.retries+op.resumed
		*op = uringOp{} // drop the buffer reference
		u.free = append(u.free, f.i)
	}
	u.mu.Unlock()
	var rec endBatch
	for k := range fin {
		o := &out[k]
		x := &o.q.x
		rec.end(x, now, o.tick, x.uringPath(), o.c.Op, o.c.N, o.c.Err, o.retries)
	}
	rec.flush() // counted before anyone sees it done
	for k := range fin {
		out[k].done <- out[k].c // Done has room by contract
	}
	u.mu.Lock()
	for k := range fin {
		out[k].q.pending--
		out[k].q.checkDrained()
	}
	u.wake.Broadcast()
	u.mu.Unlock()
}

// outcome reads one CQE's result for op: the error to complete it with,
// or again when the rest must be submitted.
func (op *uringOp) outcome(res int32) (err error, again bool) {
	x := &op.q.x
	switch {
	case res < 0:
		errno := syscall.Errno(-res)
		if transient(errno, &op.retries) {
			return nil, true
		}
		return x.wrap(op.req.Op, op.req.Op.uringOp(), errno), false
	case op.req.Op == OpSync:
		return nil, false
	}
	op.done += int(res)
	switch {
	case op.done >= len(op.req.Buf):
		return nil, false
	case x.stopped(int(res)): // op.done was aligned before res
		return x.cut(op.req.Op, op.req.Op.uringOp()), false
	}
	op.resumed++
	return nil, true
}

// deliver completes op i with err: frees its slot, sends the Completion to
// its Done channel without mu, then counts it off its queue and wakes the
// waiters. A late delivery posts a NOP to wake a reaper that may be
// waiting for someone else's CQE.
func (u *uring) deliver(i uint32, err error, late bool) {
	u.mu.Lock()
	op := &u.ops[i]
	c := Completion{Token: op.req.Token, Op: op.req.Op, N: op.done, Err: err}
	done, q := op.req.Done, op.q
	t, retries := op.tick, op.retries+op.resumed
	*op = uringOp{} // drop the buffer reference
	u.free = append(u.free, i)
	u.mu.Unlock()

	q.x.end(t, q.x.uringPath(), c.Op, c.N, c.Err, retries)
	q.x.queued(-1)
	done <- c // Done has room by contract

	u.mu.Lock()
	q.pending--
	q.checkDrained()
	nop := late && !u.parked && !u.nopQueued && u.err == nil && u.r.push(&sqe{opcode: ioringOpNop, userData: nopData})
	var seq uint32
	if nop {
		u.nopQueued = true
		seq = u.r.pushed()
	}
	u.wake.Broadcast()
	u.mu.Unlock()
	if nop {
		// Wake a reaper waiting for a CQE, so that it sees what
		// changed. The NOP uses no op slot; at most one is pushed or in
		// the kernel, which the SQ's and CQ's sizes allow for. A failure
		// is harmless: the reaper wakes with the next CQE anyway.
		_ = u.flush(-1, 0, seq)
	}
}

// drain handles a ring that broke (an io_uring_enter failed beyond retry),
// in the reaper's seat, without mu. The requests the kernel holds may
// still read or write their buffers, so none of them is reported before
// the kernel is done: the descriptor is closed (nothing more can be
// submitted, and the ring is retired so that new queues get another),
// then the CQ, still mapped, is watched until every request in the kernel
// has posted its CQE, for at most drainLimit; only then are the mappings
// released (the kernel tears the ring down with the last one) and the
// requests completed, each with its own Token, Done channel and the
// ring's error. Requests a timer holds finish on their own and see the
// error when they would resubmit.
func (u *uring) drain(cause error) {
	u.mu.Lock()
	u.err = fmt.Errorf("direct: io_uring ring broken: %w", cause)
	u.mu.Unlock()
	rings.retire(u)
	// No submitter is in the kernel once smu is ours, and none enters
	// after it: what was not consumed is withdrawn, and inKernel is exact.
	u.smu.Lock()
	u.mu.Lock()
	handed := u.withdraw(u.err)
	u.r.closeFd()
	u.mu.Unlock()
	u.smu.Unlock()
	u.failHanded(handed, u.err)
	deadline := time.Now().Add(drainLimit)
	for {
		u.r.reap(u.drained)
		u.mu.Lock()
		left := u.due()
		u.mu.Unlock()
		if left == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	u.mu.Lock()
	u.armed = false // due reads the SQ head for it: not once it is unmapped
	u.mu.Unlock()
	u.smu.Lock()
	u.r.unmap()
	u.smu.Unlock()
	u.eng.rings.Add(-1)
	// The eventfd stays open, as the ring's memory stays allocated: a
	// submitter that read u.efd under mu may still write to it, and a
	// number closed here could be another file's by then.
	u.mu.Lock()
	var failed []uint32
	for i := range u.ops {
		if u.ops[i].state == opKernel && u.ops[i].refused == nil { // refused: its submitter's
			failed = append(failed, uint32(i))
		}
	}
	for _, i := range failed {
		u.ops[i].state = opHeld
	}
	u.inKernel = 0
	close(u.broken)
	u.mu.Unlock()
	for _, i := range failed {
		u.deliver(i, u.errFor(i), false)
	}
}

// drained notes a CQE seen while draining: the kernel is done with the
// request, which drain then fails with the others.
func (u *uring) drained(userData uint64, _ int32) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.inKernel--
	if userData == evData {
		u.armed = false
		return
	}
	if userData != nopData {
		u.ops[userData].state = opKernel // still to fail, by drain
	}
}

// errFor names op i's operation and file in the ring's error.
func (u *uring) errFor(i uint32) error {
	op := &u.ops[i]
	return op.q.x.wrap(op.req.Op, op.req.Op.uringOp(), u.err)
}
