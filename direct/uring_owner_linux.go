//go:build linux

package direct

import (
	"os"
	"unsafe"
	"runtime"
	"sync/atomic"
	"syscall"

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
// an owner: a goroutine locked to its thread that holds the seat turn
// after turn, submits every SQE pushed meanwhile and waits for CQEs with
// the same io_uring_enter, and reaps. The completions' task work then
// lands on the thread that is waiting for them, and the SQEs that the
// goroutines it wakes push while it delivers go in together with its
// next enter.
//
// A submitter that finds the owner between two enters (ownerOn and not
// ownerIn) leaves its SQE to the owner and waits, still inside
// RawConn.Control (so its descriptor stays referenced) and yielding its P,
// until the SQE is consumed or withdrawn; one that finds it in the kernel
// (or no owner) submits itself, as before. The owner never gives the
// seat up while SQEs it was left are pushed, so a submitter that waits
// for it always sees its SQE settled. A refusal reaches the submitter
// exactly as its own enter's would: the owner withdraws what the kernel
// did not consume and marks each op refused. The owner gives the seat
// up (and its goroutine ends) once no more goroutines wait than Ps run,
// or the kernel holds nothing; the next Await to take the seat in that
// state hands it on again.

// ownerWanted reports, with mu held, whether an Await holding the seat
// should hand it to an owner rather than reap: more goroutines wait than
// Ps run. Test hooks that script the kernel's answers keep the seat with
// the goroutines they follow.
func (u *uring) ownerWanted() bool {
	return u.err == nil && u.efd >= 0 && u.testFail == nil && u.r.testEnter == nil &&
		u.waiters.Load() > int32(runtime.GOMAXPROCS(0))
}

// handOff gives the seat's token, which the caller holds, to a new owner,
// with mu held.
func (u *uring) handOff() {
	u.ownerOn = true
	go u.own()
}

// own runs the owner's turns until it gives the seat up.
func (u *uring) own() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	retries := 0
	for u.ownTurn(&retries) {
	}
}

// ownTurn is one turn of the owner: submit what is pushed, wait for a
// CQE, reap. It reports false once the owner gave the seat up.
func (u *uring) ownTurn(retries *int) bool {
	u.mu.Lock()
	if u.err != nil {
		u.ownerOn = false
		u.leave()
		u.mu.Unlock()
		return false
	}
	pend := u.r.sqLocalTail - atomic.LoadUint32(u.r.sqHead)
	if pend == 0 && (u.inKernel <= 0 || !u.ownerWanted()) {
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
	if pend > 0 {
		// As submitBeside: withdrawing and draining wait for the enter.
		u.smu.RLock()
		n, errno = u.r.enter(pend, 1, ioringEnterGetEvents)
		u.smu.RUnlock()
	} else {
		n, errno = u.r.enter(0, 1, ioringEnterGetEvents)
	}

	u.mu.Lock()
	u.ownerIn = false
	if n > 0 {
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
	case pend > 0:
		// The kernel took none of the SQEs (it fails an enter only
		// then): withdraw them, so that each submitter, waiting in
		// handedOff, sees its refusal, as after its own enter.
		*retries = 0
		u.smu.Lock()
		u.mu.Lock()
		u.withdraw(os.NewSyscallError("io_uring_enter", errno))
		u.mu.Unlock()
		u.smu.Unlock()
	default:
		u.drain(os.NewSyscallError("io_uring_enter", errno))
		u.mu.Lock()
		u.ownerOn = false
		u.leave()
		u.mu.Unlock()
		return false
	}
	u.r.reap(u.onCQE)
	return true
}

// handedOff leaves the SQE pushed as the seq-th (for op i at generation
// gen, or the NOP for i < 0) to the owner when it is between two enters,
// and waits, yielding, until the SQE is consumed or withdrawn; it then
// reports true and why it was withdrawn, if it was. It reports false,
// having waited for nothing, when the caller must submit the SQE itself:
// no owner, the owner in the kernel, or a resubmission (which the owner
// itself may be making, from reap).
func (u *uring) handedOff(i int64, gen, seq uint32) (bool, error) {
	u.mu.Lock()
	if !u.ownerOn || i < 0 || u.ops[i].done > 0 || u.ops[i].retries > 0 || u.ownerIn && !u.armed {
		u.mu.Unlock()
		return false, nil
	}
	if u.ownerIn && !u.kicked {
		// The owner waits in the kernel, its eventfd read with it:
		// wake it, once for every SQE pushed meanwhile.
		u.kicked = true
		efd := u.efd
		u.mu.Unlock()
		var one = [8]byte{1}
		if _, err := unix.Write(efd, one[:]); err != nil {
			// Cannot happen (the count would have to reach 2^64-1);
			// the owner wakes with the next CQE anyway.
			_ = err
		}
		u.mu.Lock()
	}
	for {
		if done, err := u.settled(i, gen, seq); done {
			u.mu.Unlock()
			return true, err
		}
		u.mu.Unlock()
		runtime.Gosched()
		u.mu.Lock()
	}
}

// evData is the user_data of the owner's eventfd read, outside the op
// indices and apart from the wake-up NOP's.
const evData = nopData - 1

// arm pushes the owner's read of the ring's eventfd, with mu held: it
// completes when a submitter kicks the owner (handedOff), ending the
// owner's wait in the kernel. It is not a request: inKernel never counts
// it (see count), since nothing makes it complete but a kick, and a
// reaper must wait only for CQEs that are due.
func (u *uring) arm() {
	s := sqe{opcode: ioringOpRead, fd: int32(u.efd), addr: uint64(uintptr(unsafe.Pointer(&u.evbuf[0]))), len: uint32(len(u.evbuf)), off: ^uint64(0), userData: evData}
	if !u.r.push(&s) {
		return // cannot happen: the SQ has a slot for every op, the NOP and this read
	}
	u.armed, u.armIn, u.armSeq = true, true, u.r.pushed()
}

// count adds the n SQEs an io_uring_enter consumed to inKernel, with mu
// held, leaving the eventfd read out if it was among them.
func (u *uring) count(n int) {
	if u.armIn && u.r.consumed(u.armSeq) {
		u.armIn = false
		n--
	}
	u.inKernel += n
}
