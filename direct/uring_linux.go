//go:build linux

package direct

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// This file speaks io_uring to the kernel directly: three syscalls, three
// mmaps and the layouts of include/uapi/linux/io_uring.h. It follows
// liburing's rules: every SQE field is written on each use, the SQ tail is
// published with a release store after the SQE is complete, the CQ tail is
// read with an acquire load before the CQE, and the CQ head is released only
// after the CQE has been copied out. sync/atomic gives Go's sequentially
// consistent ordering, which is at least that.

// From include/uapi/linux/io_uring.h.
const (
	ioringOffSQRing = 0
	ioringOffCQRing = 0x8000000
	ioringOffSQEs   = 0x10000000

	ioringFeatSingleMmap = 1 << 0
	ioringFeatExtArg     = 1 << 8

	ioringEnterGetEvents = 1 << 0
	ioringEnterExtArg    = 1 << 3

	ioringRegisterProbe = 8

	ioringOpNop   = 0
	ioringOpFsync = 3
	ioringOpRead  = 22
	ioringOpWrite = 23

	ioringFsyncDatasync = 1 << 0

	ioUringOpSupported = 1 << 0
)

type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqringOffsets
	cqOff                                                                  cqringOffsets
}

// sqe is struct io_uring_sqe, 64 bytes.
type sqe struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64
	len         uint32
	opFlags     uint32 // rw_flags, fsync_flags, ...
	userData    uint64
	bufIndex    uint16
	personality uint16
	spliceFdIn  int32
	addr3       uint64
	pad         uint64
}

// cqe is struct io_uring_cqe, 16 bytes.
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

type probeOp struct {
	op    uint8
	resv  uint8
	flags uint16
	resv2 uint32
}

type probe struct {
	lastOp uint8
	opsLen uint8
	resv   uint16
	resv2  [3]uint32
	ops    [256]probeOp
}

var _ [64]byte = [unsafe.Sizeof(sqe{})]byte{}
var _ [16]byte = [unsafe.Sizeof(cqe{})]byte{}
var _ [120]byte = [unsafe.Sizeof(uringParams{})]byte{}

// ring is one io_uring instance and its shared memory.
type ring struct {
	fd          int
	sqMap       []byte
	cqMap       []byte // aliases sqMap with IORING_FEAT_SINGLE_MMAP
	sqeMap      []byte
	sqHead      *uint32
	sqTail      *uint32
	sqMask      uint32
	sqArray     []uint32
	sqes        []sqe
	cqHead      *uint32
	cqTail      *uint32
	cqMask      uint32
	cqes        []cqe
	sqLocalTail uint32
	extArg      bool // io_uring_enter takes a timeout (IORING_FEAT_EXT_ARG, Linux 5.11)
	waitTs      unix.Timespec
	waitArg     getEventsArg // waitFor's, on the heap for the kernel to read: one caller at a time

	file *os.File        // owns fd once set (see pollable)
	prc  syscall.RawConn // file's, when the poller took fd: wait parks on it

	testEnter func(toSubmit, minComplete, flags uint32) (int, syscall.Errno) // test hook: called instead of io_uring_enter

	eng *engineRec // counts the enters that submit; nil: none counted
}

func setup(entries uint32, p *uringParams) (int, error) {
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(p)), 0)
	if errno != 0 {
		return -1, os.NewSyscallError("io_uring_setup", errno)
	}
	return int(fd), nil
}

// newRing sets up a ring of entries SQEs and the kernel's default CQ of
// twice as many CQEs.
func newRing(entries uint32) (*ring, error) {
	var p uringParams
	fd, err := setup(entries, &p)
	if err != nil {
		return nil, err
	}
	r := &ring{fd: fd}
	r.extArg = p.features&ioringFeatExtArg != 0
	if err := r.mmap(&p); err != nil {
		r.close()
		return nil, err
	}
	r.pollable()
	return r, nil
}

func (r *ring) mmap(p *uringParams) error {
	sqSize := int(p.sqOff.array + p.sqEntries*4)
	cqSize := int(p.cqOff.cqes + p.cqEntries*uint32(unsafe.Sizeof(cqe{})))
	single := p.features&ioringFeatSingleMmap != 0
	if single {
		sqSize = max(sqSize, cqSize)
	}
	var err error
	r.sqMap, err = unix.Mmap(r.fd, ioringOffSQRing, sqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return os.NewSyscallError("mmap sq ring", err)
	}
	r.cqMap = r.sqMap
	if !single {
		r.cqMap, err = unix.Mmap(r.fd, ioringOffCQRing, cqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			return os.NewSyscallError("mmap cq ring", err)
		}
	}
	sqeSize := int(p.sqEntries) * int(unsafe.Sizeof(sqe{}))
	r.sqeMap, err = unix.Mmap(r.fd, ioringOffSQEs, sqeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return os.NewSyscallError("mmap sqes", err)
	}
	u32 := func(m []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&m[off])) }
	r.sqHead = u32(r.sqMap, p.sqOff.head)
	r.sqTail = u32(r.sqMap, p.sqOff.tail)
	r.sqMask = *u32(r.sqMap, p.sqOff.ringMask)
	r.sqArray = unsafe.Slice(u32(r.sqMap, p.sqOff.array), p.sqEntries)
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&r.sqeMap[0])), p.sqEntries)
	r.cqHead = u32(r.cqMap, p.cqOff.head)
	r.cqTail = u32(r.cqMap, p.cqOff.tail)
	r.cqMask = *u32(r.cqMap, p.cqOff.ringMask)
	r.cqes = unsafe.Slice((*cqe)(unsafe.Pointer(&r.cqMap[p.cqOff.cqes])), p.cqEntries)
	r.sqLocalTail = atomic.LoadUint32(r.sqTail)
	return nil
}

// close releases the ring: its descriptor, then its mappings. The kernel
// tears the ring down (cancelling or waiting for what it still holds) when
// the last of them goes, since each mapping holds the ring's file too.
func (r *ring) close() {
	r.closeFd()
	r.unmap()
}

// closeFd closes the ring's descriptor: nothing can be submitted or waited
// for any more, but the mappings keep the ring alive, so requests in flight
// still post their CQEs where reap finds them.
func (r *ring) closeFd() {
	switch {
	case r.file != nil:
		_ = r.file.Close()
		r.file, r.prc = nil, nil
	case r.fd >= 0:
		_ = unix.Close(r.fd)
	}
	r.fd = -1
}

// pollable hands the ring's descriptor to Go's network poller, which
// the kernel's io_uring takes like a socket (the ring is readable while
// its CQ holds CQEs), so that wait parks the goroutine, not its thread.
// Where the poller does not take it, wait blocks in io_uring_enter.
func (r *ring) pollable() {
	if unix.SetNonblock(r.fd, true) != nil {
		return
	}
	r.file = os.NewFile(uintptr(r.fd), "io_uring")
	if r.file.SetReadDeadline(time.Time{}) != nil {
		return // os.ErrNoDeadline: not in the poller
	}
	if rc, err := r.file.SyscallConn(); err == nil {
		r.prc = rc
	}
}

func (r *ring) unmap() {
	if r.sqeMap != nil {
		_ = unix.Munmap(r.sqeMap)
	}
	if r.cqMap != nil && unsafe.SliceData(r.cqMap) != unsafe.SliceData(r.sqMap) {
		_ = unix.Munmap(r.cqMap)
	}
	if r.sqMap != nil {
		_ = unix.Munmap(r.sqMap)
	}
	r.sqeMap, r.cqMap, r.sqMap = nil, nil, nil
}

// push writes s into the next free SQE slot and publishes it. It returns
// false when the SQ ring is full. The caller serialises pushes.
func (r *ring) push(s *sqe) bool {
	head := atomic.LoadUint32(r.sqHead) // acquire: the kernel is done with slots before head
	if r.sqLocalTail-head >= uint32(len(r.sqes)) {
		return false
	}
	i := r.sqLocalTail & r.sqMask
	r.sqes[i] = *s // every field, so nothing of a previous use survives
	r.sqArray[i] = i
	r.sqLocalTail++
	atomic.StoreUint32(r.sqTail, r.sqLocalTail) // release: the SQE is complete
	return true
}

// enter makes one io_uring_enter call and returns the kernel's answer as
// it is; the callers below decide what each errno means where they are.
//
// EBUSY means the kernel holds CQEs it could not post, in its overflow
// list, for want of room in the CQ. Only reaping makes room, so the two
// callers differ: submit, which reaps nothing, does not retry it (a loop
// there would spin until someone else reaped) and reports it; wait hands
// it back as "reap, then look again", and its caller (the reaper, the one
// goroutine that consumes CQEs) reaps before it waits again. A shared
// ring keeps no more requests in the kernel than its CQ holds (see
// ringEntries), so neither should ever see it.
func (r *ring) enter(toSubmit, minComplete, flags uint32) (int, syscall.Errno) {
	if r.testEnter != nil {
		return r.testEnter(toSubmit, minComplete, flags)
	}
	return r.enterKernel(toSubmit, minComplete, flags)
}

// enterKernel calls io_uring_enter, what testEnter stands in for.
func (r *ring) enterKernel(toSubmit, minComplete, flags uint32) (int, syscall.Errno) {
	n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(toSubmit), uintptr(minComplete), uintptr(flags), 0, 0)
	return int(n), errno
}

// ringGone reports whether err, from io_uring_enter, says that the ring
// itself cannot be used (EBADF: its descriptor is gone; EOPNOTSUPP: it
// is no ring; ENXIO: it is being torn down; EFAULT, EINVAL: its memory
// or our call is wrong), rather than that the kernel would not take a
// submission just now: EINTR and EAGAIN (retried), EBUSY (the CQ's
// overflow) and ENOMEM, after which the ring goes on.
func ringGone(err error) bool {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return false
	}
	switch errno {
	case unix.EINTR, unix.EAGAIN, unix.EBUSY, unix.ENOMEM:
		return false
	}
	return true
}

// getEventsArg is struct io_uring_getevents_arg.
type getEventsArg struct {
	sigmask   uint64
	sigmaskSz uint32
	minWait   uint32
	ts        uint64 // *unix.Timespec
}

// waitFor submits toSubmit SQEs and waits for a CQE, as enter with
// ioringEnterGetEvents does, but for at most d: ETIME when none came.
// Only with extArg, and not through testEnter; one caller at a time (the
// owner).
func (r *ring) waitFor(toSubmit uint32, d time.Duration) (int, syscall.Errno) {
	r.waitTs = unix.NsecToTimespec(d.Nanoseconds())
	r.waitArg = getEventsArg{ts: uint64(uintptr(unsafe.Pointer(&r.waitTs)))}
	n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(toSubmit), 1,
		ioringEnterGetEvents|ioringEnterExtArg, uintptr(unsafe.Pointer(&r.waitArg)), unsafe.Sizeof(r.waitArg))
	return int(n), errno
}

// submit has the kernel consume the SQEs pushed so far, at least up to
// the seq-th (r.pushed after its push), and returns how many its own
// calls consumed. Without SQPOLL the kernel consumes SQEs only inside
// io_uring_enter, in order, under its own ring lock; it returns an error
// only when it consumed none (io_submit_sqes: a bad SQE is consumed and
// fails in its CQE instead), and it may consume fewer than it was given
// when it runs short of memory, so submit asks again until the seq-th is
// taken. Several submitters may call it at once: each offers every SQE
// pushed, and one that finds its own taken by another's call stops. EINTR
// and EAGAIN (no memory for a request just now) are retried a bounded
// number of times; EBUSY is not (see enter). On an error the SQEs not
// consumed stay pushed: the caller withdraws them (rewind), alone. The
// caller serialises its push with other pushes and with rewind.
func (r *ring) submit(seq uint32) (int, error) {
	total := 0
	for retries := 0; !r.consumed(seq); {
		left := atomic.LoadUint32(r.sqTail) - atomic.LoadUint32(r.sqHead)
		n, errno := r.enter(left, 0, 0)
		switch {
		case errno == 0 && n > 0:
			total += n
			r.entered(n)
		case errno == 0 && r.consumed(seq):
			// Another submitter's call took it.
		case (errno == 0 || errno == unix.EINTR || errno == unix.EAGAIN) && retries < maxRetries:
			retries++
		case errno == 0:
			return total, errors.New("io_uring_enter: submission not consumed")
		default:
			return total, os.NewSyscallError("io_uring_enter", errno)
		}
	}
	return total, nil
}

// entered counts an io_uring_enter that submitted n SQEs.
func (r *ring) entered(n int) {
	if r.eng != nil {
		r.eng.entered(n)
	}
}

// consumed reports whether the SQE pushed as the seq-th (r.pushed after
// its push) has been consumed by the kernel.
func (r *ring) consumed(seq uint32) bool {
	return int32(atomic.LoadUint32(r.sqHead)-seq) >= 0 // acquire: the kernel publishes its head after taking the SQEs
}

// pushed returns the SQ tail: the count of SQEs pushed, modulo 2^32.
func (r *ring) pushed() uint32 { return r.sqLocalTail }

// rewind withdraws every SQE pushed that the kernel has not consumed,
// calling f with each one's user_data: the tail goes back to the kernel's
// head, and no later io_uring_enter can pick them up. The caller
// serialises it with push and submit.
func (r *ring) rewind(f func(userData uint64)) {
	head := atomic.LoadUint32(r.sqHead)
	for p := head; p != r.sqLocalTail; p++ {
		f(r.sqes[r.sqArray[p&r.sqMask]].userData)
	}
	r.sqLocalTail = head
	atomic.StoreUint32(r.sqTail, head)
}

// wait returns once at least one CQE is ready, or the ring is unusable.
// With park it parks the goroutine in Go's poller on the ring's
// descriptor; else it blocks its thread in io_uring_enter(GETEVENTS),
// which the kernel wakes directly, the shorter way to one waiter. A
// thread blocked in a system call keeps its P until sysmon takes it back,
// though, and the goroutines the reaper wakes need Ps: 16 readers ran
// 0.78x fio's reads of the same spans with the reaper blocked in the
// kernel, 0.86x with it parked (and submitters entering side by side, see
// uring), while one reader beside a writer read 0.60x as fast parked as
// blocked. Where the poller did not take the ring (see pollable), it
// always blocks. A nil error also covers the answers after which the
// caller should reap and look again: EINTR (a signal; Go's preemption
// sends them often), EAGAIN, and EBUSY (see enter).
func (r *ring) wait(park bool) error {
	if !park || r.prc == nil || r.testEnter != nil {
		_, errno := r.enter(0, 1, ioringEnterGetEvents)
		switch errno {
		case 0, unix.EINTR, unix.EAGAIN, unix.EBUSY:
			return nil
		}
		return os.NewSyscallError("io_uring_enter", errno)
	}
	if err := r.prc.Read(func(uintptr) bool { return r.ready() }); err != nil {
		return fmt.Errorf("io_uring: waiting for completions: %w", err)
	}
	return nil
}

// ready reports whether the CQ holds a CQE.
func (r *ring) ready() bool {
	return atomic.LoadUint32(r.cqTail) != atomic.LoadUint32(r.cqHead)
}

// take copies up to len(buf) CQEs into buf, oldest first, and gives their
// slots back to the kernel; it returns how many.
func (r *ring) take(buf []cqe) int {
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail) // acquire: the CQEs before tail are written
	n := min(int(tail-head), len(buf))
	for k := range n {
		buf[k] = r.cqes[(head+uint32(k))&r.cqMask]
	}
	atomic.StoreUint32(r.cqHead, head+uint32(n)) // release: the kernel may reuse the slots
	return n
}

// reap calls f on every CQE available and releases them; it returns how
// many it saw.
func (r *ring) reap(f func(userData uint64, res int32)) int {
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail) // acquire: the CQEs before tail are written
	for h := head; h != tail; h++ {
		c := r.cqes[h&r.cqMask]
		f(c.userData, c.res)
	}
	atomic.StoreUint32(r.cqHead, tail) // release: the kernel may reuse the slots
	return int(tail - head)
}

func (r *ring) register(op uint32, arg unsafe.Pointer, n uint32) error {
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), uintptr(op), uintptr(arg), uintptr(n), 0, 0)
	if errno != 0 {
		return os.NewSyscallError("io_uring_register", errno)
	}
	return nil
}

// supports asks the kernel which opcodes it implements.
func (r *ring) supports(ops ...uint8) error {
	var p probe
	if err := r.register(ioringRegisterProbe, unsafe.Pointer(&p), uint32(len(p.ops))); err != nil {
		return err
	}
	for _, op := range ops {
		if op > p.lastOp || p.ops[op].flags&ioUringOpSupported == 0 {
			return fmt.Errorf("io_uring: opcode %d not supported by this kernel", op)
		}
	}
	return nil
}
