package reader

import (
	"io"
	"sync"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
)

// ManyDepth is how many reads of LargeRead one long ReadAt keeps in
// flight: 1 MiB at a time, as a sequential O_DIRECT reader at QD4-8 of
// 128-256 KiB reaches a disk's streaming rate.
const ManyDepth = 8

// manyRequests holds readMany's staged requests between calls.
var manyRequests = sync.Pool{New: func() any { return new([ManyDepth]direct.Request) }}

// readMany reads want at off, longer than a large buffer, through the
// queue in pieces of a large buffer each, up to ManyDepth in flight,
// copying each out in order as it completes. The caller has checked that
// the file is on io_uring.
func (r *Reader) readMany(want []byte, off int64) (int, error) {
	q := r.Queue()
	if q == nil {
		return r.readVia(r.large, want, off)
	}
	type piece struct {
		b      *Buf
		lo, hi int64
	}
	end := off + int64(len(want))
	span := aligned.Down(int64(r.large.Size()), r.align)
	next := aligned.Down(off, r.align) // where the next piece starts
	var ring [ManyDepth]piece
	head, inflight := 0, 0
	var err error  // a read that failed: the bytes past it are not copied
	var stop error // a piece that could not be submitted: the pieces before it are read
	// stage readies the next piece in the ring and its request, which
	// the caller submits.
	// The requests go to the queue through an interface, so their array
	// would escape: pooled, a ReadAt allocates nothing (TestReadAtAllocs).
	reqs := manyRequests.Get().(*[ManyDepth]direct.Request)
	defer manyRequests.Put(reqs)
	stage := func(k int) bool {
		b, gerr := r.large.GetAny()
		if gerr != nil {
			stop = gerr
			return false
		}
		p := piece{b: b, lo: next, hi: min(next+span, aligned.Up(end, r.align))}
		ring[(head+inflight+k)%ManyDepth] = p
		reqs[k] = direct.Request{Op: direct.OpRead, Buf: b.Buf.Bytes()[:p.hi-p.lo], Off: p.lo, Done: b.Done}
		next = p.hi
		return true
	}
	// submit submits the k pieces staged, together: the first ManyDepth
	// at once with one io_uring_enter (direct.SubmitBatch), then one as
	// each completes. The pieces the queue refuses give their buffers
	// back, and the error ends the read after the bytes of those before.
	submit := func(k int) {
		if k == 0 {
			return
		}
		m, serr := direct.SubmitBatch(q, reqs[:k])
		clear(reqs[:k])
		for j := m; j < k; j++ {
			r.large.Put(ring[(head+inflight+j)%ManyDepth].b)
		}
		inflight += m
		if serr != nil {
			stop = serr
		}
	}
	n := 0
	k := 0
	for stop == nil && k < ManyDepth && next < end {
		if stage(k) {
			k++
		}
	}
	submit(k)
	for inflight > 0 {
		p := ring[head]
		c := q.Await(p.b.Done)
		head, inflight = (head+1)%ManyDepth, inflight-1
		if err == nil {
			m, cerr := r.SplitEIO(p.b.Buf.Bytes()[:p.hi-p.lo], p.lo, c.N, c.Err)
			pos := off + int64(n)
			switch {
			case cerr != nil:
				if p.lo+int64(m) > pos { // the bytes before bad sectors
					n += copy(want[n:], p.b.Buf.Bytes()[pos-p.lo:m])
				}
				err = r.Errorf("reading %s at %d: %w", r.path, off+int64(n), cerr)
			case p.lo+int64(m) <= pos:
				err = r.Errorf("reading %s at %d: file ends at %d: %w", r.path, pos, p.lo+int64(m), io.ErrUnexpectedEOF)
			default:
				n += copy(want[n:], p.b.Buf.Bytes()[pos-p.lo:m])
				if n < len(want) && p.lo+int64(m) < p.hi {
					err = r.Errorf("reading %s at %d: file ends at %d: %w", r.path, off+int64(n), p.lo+int64(m), io.ErrUnexpectedEOF)
				}
			}
		}
		r.large.Put(p.b)
		if err == nil && stop == nil && next < end && stage(0) {
			submit(1)
		}
	}
	if err == nil {
		err = stop
	}
	return n, err
}
