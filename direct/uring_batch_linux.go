//go:build linux

package direct

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"unsafe"
)

// SubmitBatch accepts rs in chunks: each takes as many requests as the
// queue's Depth and the ring's free slots allow, pushes their SQEs under
// one hold of the file's reference and has them submitted with one
// io_uring_enter (fewer when the kernel takes part, see ring.submit),
// then waits for room for the next, as Submit does.
func (q *uringQueue) SubmitBatch(rs []Request) (int, error) {
	n := 0
	for n < len(rs) {
		k, err := q.submitChunk(rs[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// check is Submit's check of one request, before the ring's lock.
func (q *uringQueue) check(r Request) error {
	if err := q.x.validate(r); err != nil {
		return err
	}
	if uint64(len(r.Buf)) > maxURingLen {
		return fmt.Errorf("direct: %v of %d bytes: %w: an io_uring request takes at most %d bytes (the SQE's 32-bit length)",
			r.Op, len(r.Buf), ErrTooLarge, uint64(maxURingLen))
	}
	return nil
}

// submitChunk accepts a prefix of rs, at least one request unless it
// fails, and returns how many.
func (q *uringQueue) submitChunk(rs []Request) (int, error) {
	// Only valid requests go in; an invalid one ends the chunk, and the
	// next chunk reports it.
	valid := 0
	for valid < len(rs) {
		if err := q.check(rs[valid]); err != nil {
			if valid == 0 {
				return 0, err
			}
			break
		}
		valid++
	}
	u := q.u
	u.mu.Lock()
	defer u.mu.Unlock()
	for {
		switch {
		case q.closed:
			return 0, ErrQueueClosed
		case u.err != nil:
			return 0, u.err
		}
		if q.pending < q.depth && len(u.free) > 0 {
			break
		}
		u.step()
	}
	m := min(valid, q.depth-q.pending, len(u.free))
	b := batches.Get().(*batch)
	defer b.release()
	b.u, b.ops, b.gens = u, slices.Grow(b.ops[:0], m)[:m], slices.Grow(b.gens[:0], m)[:m]
	now := monotonic() // one clock read for the chunk
	for k := range m {
		i := u.free[len(u.free)-1]
		u.free = u.free[:len(u.free)-1]
		r := &rs[k]
		u.ops[i] = uringOp{q: q, req: *r, tick: q.x.beginAt(now, r.Op, r.Off, len(r.Buf))}
		b.ops[k] = i
	}
	q.pending += m
	q.x.queued(int64(m))
	if err := q.x.rc.Control(b.ctl); err != nil {
		b.err = q.x.wrap(rs[0].Op, rs[0].Op.uringOp(), os.ErrClosed)
	}
	// Take back the requests the kernel did not consume: a suffix of
	// the chunk, since it consumes SQEs in order and the chunk's were
	// pushed together.
	accepted := m
	for k := range m {
		i := b.ops[k]
		refused := k >= b.pushed || u.gens[i] == b.gens[k] && u.ops[i].refused != nil
		if !refused {
			continue
		}
		if accepted == m {
			accepted = k
			if k < b.pushed {
				b.err = u.ops[i].refused
			}
		}
		q.x.drop(u.ops[i].tick)
		q.x.queued(-1)
		u.ops[i] = uringOp{}
		u.free = append(u.free, i)
		q.pending--
	}
	if accepted < m {
		q.checkDrained() // a Close may have come while mu was released
		u.wake.Broadcast()
		return accepted, b.err
	}
	return m, nil
}

// batch is one chunk of SubmitBatch on its way into the kernel. Batches
// are pooled, so that a SubmitBatch allocates nothing once warm: a batch
// of two reads would otherwise spend on its allocations much of what its
// one io_uring_enter saves.
type batch struct {
	u      *uring
	ops    []uint32         // op indices, in push order
	gens   []uint32         // each op's generation once pushed
	pushed int              // how many of ops were pushed
	err    error            // why the chunk stopped short
	ctl    func(fd uintptr) // b.push bound once: RawConn.Control's argument
}

var batches = sync.Pool{New: func() any {
	b := new(batch)
	b.ctl = b.push
	return b
}}

// release returns b to the pool, keeping its slices' room.
func (b *batch) release() {
	b.u, b.ops, b.gens, b.pushed, b.err = nil, b.ops[:0], b.gens[:0], 0, nil
	batches.Put(b)
}

// push fills and pushes the chunk's SQEs on descriptor fd, then has them
// submitted together; like uring.push it runs inside RawConn.Control
// with mu held and releases mu while in the kernel.
func (b *batch) push(fd uintptr) {
	u := b.u
	for k, i := range b.ops {
		s := u.sqeFor(i, fd)
		if !u.r.push(&s) {
			b.err = errSQFull // cannot happen, as for Submit
			break
		}
		u.ops[i].state = opKernel
		u.gens[i]++
		b.gens[k] = u.gens[i]
		b.pushed++
	}
	if b.pushed == 0 {
		return
	}
	last := b.pushed - 1
	seq := u.r.pushed()
	u.mu.Unlock()
	_ = u.flush(int64(b.ops[last]), b.gens[last], seq) // refusals are read from each op
	u.mu.Lock()
}

// sqeFor returns the SQE for what remains of op i on descriptor fd.
func (u *uring) sqeFor(i uint32, fd uintptr) sqe {
	op := &u.ops[i]
	s := sqe{fd: int32(fd), userData: uint64(i)}
	switch op.req.Op {
	case OpWrite, OpRead:
		s.opcode = ioringOpWrite
		if op.req.Op == OpRead {
			s.opcode = ioringOpRead
		} else {
			s.opFlags = uint32(op.q.x.writeFlags)
		}
		rest := op.req.Buf[op.done:]
		if len(rest) > 0 {
			s.addr = uint64(uintptr(unsafe.Pointer(&rest[0])))
		}
		s.len = uint32(len(rest)) // Submit refused anything longer than maxURingLen
		s.off = uint64(op.req.Off) + uint64(op.done)
	case OpSync:
		s.opcode = ioringOpFsync
		s.opFlags = ioringFsyncDatasync
	}
	return s
}
