package reader

import (
	"fmt"
	"sync"

	"github.com/dio-storage/dio/direct"
)

// SpanOptions shape ReadSpans: how many reads in flight at once, and
// where their buffers come from.
type SpanOptions struct {
	Depth int // reads in flight at most, up to Depth

	// NoWait takes every buffer with GetAny, never waiting: for reads
	// made while another call holds buffers and waits for the caller
	// (a ReadAt from inside blobio's ReadBlobs fn). Otherwise the first
	// read waits for a buffer (Get), the others take one only when it is
	// free, and at most half the large ones, leaving the rest to others.
	NoWait bool
}

// spanRun is one ReadSpans call's state, pooled, so that a ReadAt split
// into pieces allocates nothing: its requests reach the queue through an
// interface, and would escape.
type spanRun struct {
	r        *Reader
	q        direct.Queue // nil: the reads run as goroutines
	slots    [Depth]spanSlot
	free     []int // slots not in flight
	batch    []direct.Request
	done     chan direct.Completion
	inflight int // reads submitted, or running as goroutines
	large    int // large buffers held
	last     direct.Completion
}

// spanSlot is span k's read into b.
type spanSlot struct {
	k      int
	b      *Buf
	pool   *Pool
	lo, hi int64
}

var spanRuns = sync.Pool{New: func() any {
	return &spanRun{free: make([]int, 0, Depth), batch: make([]direct.Request, 0, Depth), done: make(chan direct.Completion, Depth)}
}}

// ReadSpans reads up to n spans of the file, span(k) giving the k-th,
// [lo, hi) aligned and no longer than a large buffer (or !ok: no more),
// with up to o.Depth in flight: staged as buffers come and submitted together (one
// io_uring_enter for a batch on the io_uring engine), and on the pwrite
// engine, whose queue would only hand the same preads to workers, each
// a goroutine of its own. It calls deliver from the calling goroutine
// for every span as its read completes, in any order, with the span's
// buffer and the bytes read (fewer at the end of the file; with an EIO
// split into sectors, the bytes before the bad ones and a
// *direct.SectorError), or with a nil buffer and the error that kept
// the read from starting (a refused submission, a buffer that could not
// be made), after which no later span starts. deliver may read into the
// buffer again (with Read); the buffer goes back when it returns.
//
// The first error deliver returns ends it: no more spans start, those in
// flight are awaited, undelivered, and the error is returned. A panic in
// deliver waits for them too, so that no buffer goes back while the
// kernel may still write into it.
func (r *Reader) ReadSpans(n int, o SpanOptions, span func(k int) (lo, hi int64, ok bool), deliver func(k int, b *Buf, n int, err error) error) error {
	if n == 0 {
		return nil
	}
	run := spanRuns.Get().(*spanRun)
	run.r, run.q, run.inflight, run.large = r, nil, 0, 0
	if r.uring {
		run.q = r.Queue()
	}
	depth := min(max(o.Depth, 1), Depth)
	run.free = run.free[:0]
	for i := depth - 1; i >= 0; i-- {
		run.free = append(run.free, i)
	}
	held := -1 // the slot being delivered: its buffer goes back after deliver
	broken := false
	defer func() {
		if broken {
			return // completions may still come: the run is not reused
		}
		if held >= 0 {
			run.put(held)
		}
		for run.inflight > 0 {
			run.put(run.await())
		}
		run.r, run.q = nil, nil
		spanRuns.Put(run)
	}()
	// unstarted tells deliver of span k, which could not start, and
	// starts none after it.
	unstarted := func(k int, err error) error {
		n = min(n, k)
		return deliver(k, nil, 0, err)
	}
	for next := 0; ; {
		for next < n && len(run.free) > 0 {
			lo, hi, ok := span(next)
			if !ok {
				n = next
				break
			}
			b, pool, err := run.buffer(hi-lo, o.NoWait)
			if err != nil {
				if derr := unstarted(next, err); derr != nil {
					return derr
				}
				break
			}
			if b == nil {
				break // the others' come back as they complete
			}
			slot := run.free[len(run.free)-1]
			run.free = run.free[:len(run.free)-1]
			run.slots[slot] = spanSlot{k: next, b: b, pool: pool, lo: lo, hi: hi}
			run.stage(slot)
			next++
		}
		if k, err := run.submit(); err != nil {
			if derr := unstarted(k, err); derr != nil {
				return derr
			}
		}
		if run.inflight == 0 {
			return nil
		}
		held = run.await()
		if held >= depth || run.slots[held].b == nil {
			// Not a read of ours in flight: the queue broke and made it
			// up. Wait for nothing more; the buffers stay out of the pool.
			broken = true
			err := fmt.Errorf("%s: read queue failed: %w", r.name, run.last.Err)
			if derr := unstarted(0, err); derr != nil {
				return derr
			}
			return err
		}
		s := &run.slots[held]
		m, err := run.last.N, run.last.Err
		if run.q != nil {
			m, err = r.SplitEIO(s.b.Buf.Bytes()[:s.hi-s.lo], s.lo, m, err)
		} else {
			m, err = EndOK(m, err)
		}
		if err := deliver(s.k, s.b, m, err); err != nil {
			return err
		}
		run.put(held)
		held = -1
	}
}

// buffer returns a buffer for a read of n bytes, or nil when it is to
// wait for one of its own reads to come back first.
func (run *spanRun) buffer(n int64, noWait bool) (*Buf, *Pool, error) {
	pool := run.r.PoolFor(n)
	ours := run.inflight + len(run.batch)
	var b *Buf
	var err error
	switch {
	case noWait:
		b, err = pool.GetAny()
	case pool == run.r.large && run.large >= LargeBuffers/2 && ours > 0:
		// Half the large buffers are ours: wait for one.
	case ours == 0:
		b, err = pool.Get()
	default:
		b, err = pool.TryGet()
	}
	if b != nil && pool == run.r.large {
		run.large++
	}
	return b, pool, err
}

// stage readies the read of slot: on a queue it joins the batch submit
// submits; on the pwrite engine it starts at once, a goroutine reading
// in a thread of its own.
func (run *spanRun) stage(slot int) {
	s := &run.slots[slot]
	p := s.b.Buf.Bytes()[:s.hi-s.lo]
	run.r.busy.Add(1)
	if run.q != nil {
		run.batch = append(run.batch, direct.Request{Op: direct.OpRead, Buf: p, Off: s.lo, Token: uint64(slot), Done: run.done})
		return
	}
	run.inflight++
	f, done, lo := run.r.f, run.done, s.lo
	go func() {
		n, err := f.ReadAt(p, lo)
		done <- direct.Completion{Token: uint64(slot), Op: direct.OpRead, N: n, Err: err}
	}()
}

// submit submits the staged batch and gives back the buffers of the
// reads the queue refused; it returns the first span refused, and why.
func (run *spanRun) submit() (int, error) {
	if len(run.batch) == 0 {
		return 0, nil
	}
	k, err := direct.SubmitBatch(run.q, run.batch)
	run.inflight += k
	first := -1
	for _, req := range run.batch[k:] {
		if first < 0 {
			first = run.slots[req.Token].k
		}
		run.inflight++ // put counts it out
		run.put(int(req.Token))
	}
	clear(run.batch) // drop the buffers' references
	run.batch = run.batch[:0]
	return first, err
}

// await waits for a read to complete and returns its slot; the
// completion is run.last.
func (run *spanRun) await() int {
	if run.q != nil {
		run.last = run.q.Await(run.done)
	} else {
		run.last = <-run.done
	}
	return int(run.last.Token)
}

// put gives back the buffer of slot's read, no longer in flight.
func (run *spanRun) put(slot int) {
	s := &run.slots[slot]
	run.inflight--
	run.r.busy.Add(-1)
	if s.pool == run.r.large {
		run.large--
	}
	s.pool.Put(s.b)
	*s = spanSlot{}
	run.free = append(run.free, slot)
}
