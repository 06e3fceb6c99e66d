//go:build linux

package direct

import (
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The owner: one thread submits while many goroutines wait.
//
// A read's completion runs as task work on the thread that submitted it:
// the kernel posts the CQE only once that thread runs it. When every
// goroutine enters the kernel for its own Submit, those threads are
// whichever ran the Submit, and by the time the read completes most are
// asleep in futex: the kernel wakes each to post its CQE, and the reaper
// after it. With 16 goroutines reading that cost 2.1-2.3x fio's CPU per
// read (0.41 context switches per read against fio's 0.026; see
// docs/engine.md). So while more goroutines wait than Ps run (the rule
// reap already uses to choose where to wait), the reaper's seat goes to
// an owner: a goroutine that holds the seat turn after turn, submits
// every SQE pushed meanwhile and waits for CQEs with the same
// io_uring_enter, and reaps. The completions' task work then lands on
// the thread that submitted them, which is waiting for them as long as
// the owner stays on it (a yield may move it). Between turns the owner
// yields its P (runtime.Gosched): the goroutines its reaping woke were
// readied on that P, so they run there first, each pushing its next
// SQE, and those go in together with the owner's next enter, as fio
// resubmits as it reaps. The owner is not locked to its thread: a locked goroutine
// that yields hands its P to another thread and sleeps until it runs
// again, a futex wake each turn. A yield that finds the P busy with
// goroutines that compute is not repeated for a while (see yielder).
// Yielding cut the CPU per read of 16 readers by a sixth and raised
// their reads/s as much; locking the owner to its thread and yielding
// did worse than doing neither, and so did waiting in Go's poller
// (docs/engine.md). With fewer waiters each submits and waits itself,
// which costs one goroutine less than a hand-off to the owner and back.
//
// While an owner runs, a Submit pushes its SQE and returns: the owner
// submits it (kicked out of its wait in the kernel, if it is there,
// through an eventfd that a read in its own ring watches). The submitter
// no longer holds the file's reference until the kernel takes the SQE,
// so a handed-off SQE names a descriptor of the queue's own, a dup of
// the file's made at its first hand-off and closed by the queue's Close
// (see uringQueue.dup): a Close of the file cannot free the number under
// it. A refusal cannot reach a Submit that has returned: the ring's
// withdraw completes a handed-off request with the refusal instead, on
// its Done channel. Resubmissions of short transfers and retries, the
// wake-up NOP and SQEs pushed while the owner sits in the kernel without
// its eventfd read go in as before, from the goroutine that pushed them.
//
// The owner never gives the seat up while SQEs are pushed, and a Submit
// hands off only while ownerOn, both under mu: no handed-off SQE is left
// without someone to submit it. The owner gives the seat up (and its
// goroutine ends) once no more goroutines wait than Ps run, or the
// kernel holds nothing; the next Await to take the seat in that state
// hands it on again.

// ownerWanted reports, with mu held, whether an Await holding the seat
// should hand it to an owner rather than reap: more goroutines wait than
// Ps run, and there is more than one P. The owner keeps its P while it
// waits in the kernel (a system call gives it up only when sysmon takes
// it, after 20 µs or more), so with GOMAXPROCS=1 the goroutines it woke
// waited for it: 16 readers on the fast device ran 20,000-30,000 reads/s
// against 33,000-49,000 without an owner. Test hooks that script the
// kernel's answers keep the seat with the goroutines they follow, unless
// the test asks for an owner.
func (u *uring) ownerWanted() bool {
	if u.err != nil || u.efd < 0 {
		return false
	}
	if u.testOwner {
		return true
	}
	procs := runtime.GOMAXPROCS(0)
	return procs > 1 && u.testFail == nil && u.r.testEnter == nil && u.waiters.Load() > int32(procs)
}

// handOff gives the seat's token, which the caller holds, to a new owner,
// with mu held.
func (u *uring) handOff() {
	u.ownerOn = true
	go u.own()
}

// own runs the owner's turns until it gives the seat up, yielding its P
// between them to the goroutines a turn woke (see above) while yields
// are quick (see yielder).
func (u *uring) own() {
	retries, idle := 0, false
	var y yielder
	for u.ownTurn(&retries, &idle) {
		if y.due() {
			t := monotonic()
			runtime.Gosched()
			y.took(monotonic() - t)
		}
	}
}

// yielder decides turn by turn whether the owner yields its P. A yield
// pays when the goroutines it lets run are readers that push their next
// SQE and wait again within microseconds; when they compute instead
// (Pebble's readers between block-cache misses, any CPU-bound goroutine
// on the P), the owner waits behind them in the global run queue while
// the SQEs pushed meanwhile wait for it. So a yield that took longer
// than yieldSlow turns yielding off for the next yieldBackoff turns,
// twice as many after each slow one up to yieldBackoffMax, and a quick
// one turns it back on. Pebble's YCSB C with data 8x its memory (4
// readers, 3 rounds against the owner before yielding) ran 0.86x
// (0.78-1.12x) with the owner always yielding, 1.10x (0.99-1.27x) with
// this back-off; 16 bare readers kept most of the gain (docs/engine.md).
type yielder struct {
	backoff int // turns without a yield after the last slow one
	skipped int // of those, how many have passed
}

const (
	yieldSlow       = 50 * time.Microsecond // readers that wait again at once stay well within it
	yieldBackoff    = 16
	yieldBackoffMax = 1024
)

// due reports whether this turn yields.
func (y *yielder) due() bool {
	if y.skipped < y.backoff {
		y.skipped++
		return false
	}
	y.skipped = 0
	return true
}

// took records how long (ns) the yield due allowed took.
func (y *yielder) took(d int64) {
	if d > int64(yieldSlow) {
		y.backoff = min(max(2*y.backoff, yieldBackoff), yieldBackoffMax)
	} else {
		y.backoff = 0
	}
}

// ownerLinger is how long an owner with nothing in the kernel waits for a
// submission while many goroutines wait, before it gives the seat up. On
// a fast device the owner often reaps every request the kernel holds
// before the goroutines it wakes have pushed their next: giving the seat
// up there and handing it to a new owner a moment later cost a goroutine
// and a hand-off per turn (21,000 new owners in 2 s of 16 readers, every
// one for want of a request in the kernel).
const ownerLinger = time.Millisecond

// ownTurn is one turn of the owner: submit what is pushed, wait for a
// CQE, reap. It reports false once the owner gave the seat up. idle says
// the last turn waited ownerLinger for nothing.
func (u *uring) ownTurn(retries *int, idle *bool) bool {
	u.mu.Lock()
	if u.err != nil {
		u.ownerOn = false
		u.leave()
		u.mu.Unlock()
		return false
	}
	pend := u.r.sqLocalTail - atomic.LoadUint32(u.r.sqHead)
	// What others pushed: not the owner's own read, still pushed after an
	// enter that consumed none of what it offered (EAGAIN), which only a
	// kick completes. Counting it as work sent the owner into the kernel
	// with nothing due, for good, holding smu for reading.
	work := pend
	if u.armed && !u.readIn() {
		work--
	}
	// With nothing in the kernel the owner waits only for its eventfd
	// read, for ownerLinger, and only if the kernel can time it out.
	linger := work == 0 && u.due() <= 0
	if work == 0 && !u.ownerWanted() || linger && (*idle || !u.r.extArg || u.r.testEnter != nil) {
		u.ownerOn = false
		u.leave()
		u.mu.Unlock()
		return false
	}
	if !u.armed {
		u.arm()
		pend++
	}
	u.ownerIn = true
	u.mu.Unlock()

	var n int
	var errno syscall.Errno
	*idle = false
	switch {
	case linger:
		u.smu.RLock()
		n, errno = u.r.waitFor(pend, ownerLinger)
		u.smu.RUnlock()
		*idle = errno == unix.ETIME
		if *idle {
			errno = 0
		}
	case pend > 0:
		// As submitBeside: withdrawing and draining wait for the enter.
		u.smu.RLock()
		n, errno = u.r.enter(pend, 1, ioringEnterGetEvents)
		u.smu.RUnlock()
	default:
		n, errno = u.r.enter(0, 1, ioringEnterGetEvents)
	}

	u.mu.Lock()
	u.ownerIn = false
	if n > 0 {
		u.r.entered(n)
		u.count(n)
		*retries = 0
	}
	u.mu.Unlock()
	switch {
	case errno == 0 || errno == unix.EBUSY:
	case (errno == unix.EINTR || errno == unix.EAGAIN) && (pend == 0 || *retries < maxRetries):
		if pend > 0 {
			*retries++
		}
	case pend > 0 && !ringGone(errno):
		// The kernel took none of the SQEs (it fails an enter only
		// then): withdraw them. A waiting submitter finds its refusal
		// as after its own enter; a handed-off request completes with
		// it.
		*retries = 0
		err := os.NewSyscallError("io_uring_enter", errno)
		u.smu.Lock()
		u.mu.Lock()
		handed := u.withdraw(err)
		u.mu.Unlock()
		u.smu.Unlock()
		u.failHanded(handed, err)
	default:
		// A wait that failed beyond retry, or an enter whose error
		// says the ring is gone: drain withdraws what is pushed too.
		u.drain(os.NewSyscallError("io_uring_enter", errno))
		u.mu.Lock()
		u.ownerOn = false
		u.leave()
		u.mu.Unlock()
		return false
	}
	u.reapAll()
	return true
}

// handing reports, with mu held, whether op's SQE, about to be pushed,
// goes to the owner; fd is the file's descriptor, valid for the call
// (push runs inside RawConn.Control). A queue's first hand-off dups it.
func (u *uring) handing(op *uringOp, fd uintptr) bool {
	if !u.ownerOn || op.done > 0 || op.retries > 0 || u.ownerIn && !u.armed {
		return false
	}
	return op.q.dup(fd)
}

// kickWanted reports, with mu held, whether a submitter that has just
// handed the owner an SQE while the owner waits in the kernel must kick
// it out. It need not while CQEs keep coming (a reaper found some within
// kickWindow) and more of them are due than SQEs wait for the owner's
// next enter: then the next CQE ends the wait, and the owner submits
// what waits in the same turn that reaps it, as fio resubmits as it
// reaps. Each kick costs a write(2) and a wake of the owner's thread;
// with 16 readers on the fast device kicks were half the owner's turns
// (0.14 writes and 0.30 io_uring_enter per read). An SQE left unkicked
// waits for the first of the requests in flight to complete (about
// 1/due of a request's time in the device while they flow), never
// behind more requests than wait beside it, and never while the
// requests in flight have gone quiet (a slow fdatasync), when a kick
// costs nothing next to the wait it saves.
func (u *uring) kickWanted() bool {
	waiting := int(u.r.sqLocalTail - atomic.LoadUint32(u.r.sqHead))
	if u.armed && !u.readIn() {
		waiting-- // the owner's own read, pushed and not yet consumed
	}
	return waiting >= u.due() || monotonic()-u.lastCQE > int64(u.kickAfter)
}

// kickWindow is how recently CQEs must have come for a submitter to
// leave the owner's wait to the next one (see kickWanted): a few times
// the gap between completions of 16 reads in flight on the virtio disk
// (150-200 µs each, one every 10-15 µs) and the fast device (5-10 µs).
const kickWindow = 50 * time.Microsecond

// kick wakes the owner from its wait in the kernel: its eventfd read
// completes. mu is not held.
func (u *uring) kick(efd int) {
	one := [8]byte{1}
	// A failure cannot happen (the count would have to reach 2^64-1),
	// and would be harmless: the owner wakes with the next CQE anyway.
	_, _ = unix.Write(efd, one[:])
}

// failHanded completes the handed-off requests of ops, which withdraw
// took back from the SQ, with err. No lock is held.
func (u *uring) failHanded(ops []uint32, err error) {
	for _, i := range ops {
		op := &u.ops[i]
		u.deliver(i, op.q.x.wrap(op.req.Op, op.req.Op.uringOp(), err), false)
	}
}

// evData is the user_data of the owner's eventfd read, outside the op
// indices and apart from the wake-up NOP's.
const evData = nopData - 1

// arm pushes the owner's read of the ring's eventfd, with mu held: it
// completes when a submitter kicks the owner, ending the owner's wait in
// the kernel. inKernel counts it as any SQE consumed; it is not due (see
// due), since nothing makes it complete but a kick.
func (u *uring) arm() {
	s := sqe{opcode: ioringOpRead, fd: int32(u.efd), addr: uint64(uintptr(unsafe.Pointer(&u.evbuf[0]))), len: uint32(len(u.evbuf)), off: ^uint64(0), userData: evData}
	if !u.r.push(&s) {
		return // cannot happen: the SQ has a slot for every op, the NOP and this read
	}
	u.armed, u.armIn, u.armSeq = true, false, u.r.pushed()
}

// readIn reports, with mu held, whether the owner's armed read has been
// consumed by the kernel. It stays there until a kick, possibly across
// any number of other SQEs (an owner leaves it there, and the ring may
// then run without one for hours), so the answer is latched once seen:
// after 2^31 more SQEs the SQ head would compare below armSeq again, and
// due would count the read as owed. due runs after every enter that
// submits, so it sees the read consumed long before that.
func (u *uring) readIn() bool {
	if u.armed && !u.armIn && u.r.consumed(u.armSeq) {
		u.armIn = true
	}
	return u.armed && u.armIn
}

// count adds the n SQEs an io_uring_enter consumed to inKernel, with mu
// held.
func (u *uring) count(n int) { u.inKernel += n }

// due is how many CQEs the kernel owes, with mu held: the SQEs counted in
// the kernel but the owner's eventfd read, which completes only when
// kicked. Taking the read out once the kernel has consumed it (rather
// than leaving it out of the count whichever enter consumed it) keeps the
// arithmetic exact when a submitter's enter takes the read along and the
// owner reaps its CQE before that submitter counts: due may then lag the
// truth for a moment, below it, never above, as inKernel itself does
// (see uring). An owner that left the read out once too often waited in
// the kernel for a CQE that was not due, for good.
func (u *uring) due() int {
	if u.readIn() {
		return u.inKernel - 1
	}
	return u.inKernel
}
