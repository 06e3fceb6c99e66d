//go:build linux

package direct

import (
	"errors"
	"fmt"
	"math"
	"runtime"

	"golang.org/x/sys/unix"
)

// maxURingLen is the longest request the io_uring engine takes: an SQE's
// len is a __u32 (include/uapi/linux/io_uring.h).
const maxURingLen = math.MaxUint32

// uringQueue is one queue's view of a shared ring (see uring): its bound
// of requests in flight and its Close. It owns no ring, no descriptor and
// no goroutine; its state is guarded by the ring's mutex, so the counts
// that Submit, Await and Close look at change only together with the
// ring's own.
type uringQueue struct {
	u     *uring
	x     xfer
	depth int

	// Guarded by u.mu.
	pending   int           // requests accepted and not yet delivered to their Done channel
	closed    bool          // Close was called
	drained   chan struct{} // closed once nothing is pending and nothing more will be: closed, or the ring broke
	isDrained bool
	ofd       int             // the queue's own descriptor for SQEs handed to the owner, if dupped
	dupped    bool            // ofd is open
	noDup     bool            // the dup failed: this queue submits its own SQEs
	ofdClean  runtime.Cleanup // closes ofd if the queue is dropped without Close
}

// dup makes sure the queue has a descriptor of its own for SQEs handed to
// the owner, whose enter may come after the file's Close: a dup of fd,
// the file's, held until the queue's Close, when none of its requests is
// left. With u.mu held (a queue's first hand-off pays the system call
// there); false when the dup failed (EMFILE), and the queue's SQEs then go
// in with their submitters.
func (q *uringQueue) dup(fd uintptr) bool {
	switch {
	case q.dupped:
		return true
	case q.noDup:
		return false
	}
	nfd, err := unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		q.noDup = true
		return false
	}
	q.ofd, q.dupped = nfd, true
	// A queue dropped without Close must not keep its file open for
	// good (an unlinked file's blocks with it).
	q.ofdClean = runtime.AddCleanup(q, func(fd int) { unix.Close(fd) }, nfd)
	return true
}

// checkDrained closes drained when nothing is pending and nothing will
// be, with u.mu held.
func (q *uringQueue) checkDrained() {
	if !q.isDrained && q.pending == 0 && (q.closed || q.u.err != nil) {
		q.isDrained = true
		close(q.drained)
	}
}

func newURingQueue(x xfer, depth int) (Queue, error) {
	u, err := rings.get()
	if err != nil {
		return nil, err
	}
	return &uringQueue{u: u, x: x, depth: depth, drained: make(chan struct{})}, nil
}

// URingError reports why EngineAuto would not use io_uring (setup refused
// by the kernel, a sandbox or kernel.io_uring_disabled, or a missing
// opcode), or nil when it would. The probe runs once per process: it sets
// up the first shared ring, which later queues use, and the answer is
// kept.
func URingError() error { return rings.probe() }

func (q *uringQueue) Depth() int         { return q.depth }
func (q *uringQueue) Engine() EngineKind { return EngineURing }

// Submit accepts r once the queue has fewer than Depth requests
// undelivered and the ring has a free slot, reaping (or waiting for the
// reaper) until then. It counts r under the ring's mutex and returns once
// the kernel has taken r's SQE (see uring.flush), so a Submit refused
// (closed queue, broken ring, closed file, failed submission) leaves
// nothing counted that Close would wait for; or, while an owner submits
// for the ring, once r's SQE is pushed for it, and a refusal of that SQE
// is then r's Completion (see own).
func (q *uringQueue) Submit(r Request) error {
	if err := q.check(r); err != nil {
		return err
	}
	u := q.u
	u.mu.Lock()
	defer u.mu.Unlock()
	for {
		switch {
		case q.closed:
			return ErrQueueClosed
		case u.err != nil:
			return u.err
		}
		if q.pending < q.depth && len(u.free) > 0 {
			break
		}
		u.step()
	}
	i := u.free[len(u.free)-1]
	u.free = u.free[:len(u.free)-1]
	u.ops[i] = uringOp{q: q, req: r, tick: q.x.begin(r.Op, r.Off, len(r.Buf))}
	q.pending++
	q.x.queued(1)
	if err := u.start(i); err != nil {
		q.x.drop(u.ops[i].tick)
		q.x.queued(-1)
		u.ops[i] = uringOp{}
		u.free = append(u.free, i)
		q.pending--
		q.checkDrained() // a Close may have come while mu was released
		u.wake.Broadcast()
		return err
	}
	return nil
}

// Await returns the next Completion from done, reaping the ring (for every
// queue on it) while it waits. Every request accepted by Submit gets its
// own Completion, with its Token, on its Done channel, even when the ring
// breaks or the queue is closed. Only when the queue is closed (or its
// ring broken) and none of its requests is outstanding, so that nothing
// can ever arrive, does Await return a Completion of no request: Op 0 and
// Err ErrQueueClosed (or the ring's error).
func (q *uringQueue) Await(done <-chan Completion) Completion {
	u := q.u
	u.waiters.Add(1)
	defer u.waiters.Add(-1)
	broken := u.broken
	for {
		select {
		case c := <-done:
			return c
		default:
		}
		select {
		case c := <-done:
			return c
		case <-u.seat:
			select {
			case c := <-done:
				// Both were ready: hand the seat on rather than wait
				// in the kernel with the Completion in hand.
				u.mu.Lock()
				u.leave()
				u.mu.Unlock()
				return c
			default:
			}
			u.mu.Lock()
			if u.ownerWanted() {
				u.handOff()
				u.mu.Unlock()
				continue
			}
			u.mu.Unlock()
			u.reap()
		case <-q.drained:
			return q.last(done)
		case <-broken:
			u.mu.Lock()
			idle := q.pending == 0
			u.mu.Unlock()
			if idle {
				return q.last(done)
			}
			broken = nil // drained closes when the last is delivered
		}
	}
}

// last is Await's answer once nothing more can come for the queue: what
// done still holds, else a Completion of no request.
func (q *uringQueue) last(done <-chan Completion) Completion {
	select {
	case c := <-done:
		return c
	default:
	}
	u := q.u
	u.mu.Lock()
	defer u.mu.Unlock()
	if q.closed {
		return Completion{Err: ErrQueueClosed}
	}
	return Completion{Err: u.err}
}

// Close marks the queue closed, so that later Submits fail, then reaps
// until every request it accepted has been delivered: it waits for its
// own requests only, and cannot wait for one that was never counted.
func (q *uringQueue) Close() error {
	u := q.u
	u.mu.Lock()
	if q.closed {
		u.mu.Unlock()
		return nil
	}
	q.closed = true
	q.checkDrained() // Awaits with nothing outstanding return
	for q.pending > 0 {
		u.step()
	}
	ofd, dupped := q.ofd, q.dupped
	q.dupped = false
	u.mu.Unlock()
	if dupped {
		// Every SQE that named it has completed: pending is 0.
		q.ofdClean.Stop()
		unix.Close(ofd)
	}
	rings.put(u)
	return nil
}

// RegisterBuffers refuses: requests go out plain (no READ_FIXED or
// WRITE_FIXED). A shared ring has one table of registered buffers for
// every file and queue in the process, and a ring of a writer's own for
// them did not pay for itself where the device sets the pace: QD4 writes
// on a virtio disk ran 0.65x (64 KiB) to 1.0x (512 KiB) with registration;
// only on a memory-backed loop device, where the CPU alone counts, did
// medians gain 6-23%, inside the run-to-run spread (Linux 6.18, 5 rounds,
// the private-ring queue of 5b6f618). So writers share the rings too. The
// error matches errors.ErrUnsupported; callers treat it as "plain
// requests".
func (q *uringQueue) RegisterBuffers([][]byte) error {
	return fmt.Errorf("direct: io_uring fixed buffers on a shared ring: %w", errors.ErrUnsupported)
}
