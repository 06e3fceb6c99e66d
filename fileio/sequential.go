package fileio

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/internal/reader"
)

// Read-ahead sizes.
const (
	// maxSeqRead is the largest read a Sequential makes: fio's sequential
	// O_DIRECT read at QD4 and 512 KiB is the yardstick (issue 22), and
	// DefaultReadAhead keeps four of them in flight.
	maxSeqRead = 512 << 10

	// firstSeqRead is a Sequential's first read after it starts or jumps:
	// the reads then double up to maxSeqRead, so that a short scan (a
	// footer, an index block) reads little more than it asked for, as
	// RocksDB's readahead grows from 8 KiB for the same reason.
	firstSeqRead = 64 << 10
)

// A Sequential reads a Reader's file from front to back with read-ahead:
// while its caller consumes one window, the next ones are in flight,
// reads that grow to 512 KiB each, up to Options.ReadAhead (2 MiB by
// default) ahead of the caller. It serves io.Reader and io.Seeker (so
// io.Copy, bufio and io.ReadFull work), io.WriterTo (io.Copy then writes
// from its buffers without a copy), and io.ReaderAt for a caller that
// reads with offsets in order (a compaction reading blocks with ReadAt):
// a ReadAt at or just past where the last one ended, or inside what is
// read ahead, is served from the window; any other runs as the Reader's
// ReadAt, leaving the window where it is.
//
// A read that fails with EIO is read again sector by sector, as the
// Reader's ReadAt does: the caller gets every byte before a bad sector,
// then an error naming it (a *direct.SectorError); a later call tries
// again, and a Seek past the sector reads on.
//
// A Sequential is safe for concurrent use, but its calls run one at a
// time: concurrent readers of one file share the Reader. Close releases
// its buffers (2.5 MiB by default); closing the Reader closes it too.
type Sequential struct {
	r  *Reader
	mu sync.Mutex

	q     direct.Queue
	slab  *aligned.Buffer
	slots []seqSlot        // the ring of windows
	head  int              // the oldest window, the one being consumed
	used  int              // windows read or in flight, from head
	ahead int64            // where the next window starts: the end of what is read ahead
	grow  int              // the next window's length
	batch []direct.Request // fill's reads, submitted together

	pos     int64 // Read's position
	lastEnd int64 // where the last read ended, to tell a sequential ReadAt
	started bool
	closed  bool
}

// seqSlot is one window: a buffer and the stretch of the file it holds.
type seqSlot struct {
	buf      []byte
	off      int64
	want     int // bytes asked of the device
	n        int // bytes it gave, once done
	err      error
	inflight bool
	done     chan direct.Completion
}

// NewSequential returns a Sequential over r starting at off, for Read.
// Nothing is read, and no memory taken, until its first read.
func (r *Reader) NewSequential(off int64) (*Sequential, error) {
	if off < 0 {
		return nil, fmt.Errorf("%w: Sequential at negative offset %d", ErrOffset, off)
	}
	s := &Sequential{r: r, pos: off, lastEnd: off}
	if err := r.c.Track(s, s.closeByReader); err != nil {
		return nil, err
	}
	return s, nil
}

// Read reads up to len(p) bytes at the Sequential's position and moves
// it on, as io.Reader does: at Size it returns 0 and io.EOF.
func (s *Sequential) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.r.c.Release()
	if len(p) == 0 {
		return 0, nil
	}
	if s.pos >= s.r.c.Size() {
		return 0, io.EOF
	}
	n, err := s.window(p, s.pos)
	s.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// Seek sets the position of the next Read, as io.Seeker does; io.SeekEnd
// is relative to Size. A position past Size is allowed (Read then gives
// io.EOF), a negative one is an error matching ErrOffset. It reads
// nothing: the next Read starts the read-ahead there if the window does
// not hold it.
func (s *Sequential) Seek(offset int64, whence int) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, ErrClosed
	}
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = s.pos + offset
	case io.SeekEnd:
		abs = s.r.c.Size() + offset
	default:
		return 0, fmt.Errorf("fileio: Seek: invalid whence %d", whence)
	}
	if abs < 0 {
		return 0, fmt.Errorf("%w: Seek to %d", ErrOffset, abs)
	}
	s.pos, s.lastEnd = abs, abs
	return abs, nil
}

// ReadAt reads len(p) bytes at off, as io.ReaderAt does. A read at or
// just past where the last one ended (within a window's length), or
// inside what is read ahead, is served from the read-ahead; any other
// goes to the Reader's ReadAt and leaves the read-ahead as it is, so that
// a look at the footer does not throw a scan's window away; the read
// after it, if it follows on, starts the read-ahead there. It does not
// move Read's position.
func (s *Sequential) ReadAt(p []byte, off int64) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.r.c.Release()
	if off < 0 {
		return 0, fmt.Errorf("%w: ReadAt at negative offset %d", ErrOffset, off)
	}
	if off >= s.r.c.Size() || len(p) == 0 {
		return s.r.c.ReadAtHeld(p, off)
	}
	if !s.holds(off) && !(off >= s.lastEnd && off-s.lastEnd <= maxSeqRead) {
		// Not in order: read it alone, and remember where it ended, so
		// that a scan starting here gets the read-ahead from its
		// second read on.
		n, err := s.r.c.ReadAtHeld(p, off)
		s.lastEnd = off + int64(n)
		return n, err
	}
	return s.window(p, off)
}

// WriteTo writes the file from the position to Size to w, straight from
// the read-ahead buffers, and moves the position to Size: io.Copy uses
// it.
func (s *Sequential) WriteTo(w io.Writer) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.r.c.Release()
	var total int64
	for s.pos < s.r.c.Size() {
		b, err := s.next(s.pos)
		if err != nil {
			return total, err
		}
		m, err := w.Write(b)
		total += int64(m)
		s.pos += int64(m)
		s.lastEnd = s.pos
		if err != nil {
			return total, err
		}
		if m < len(b) {
			return total, io.ErrShortWrite
		}
	}
	return total, nil
}

// enter checks that neither s nor its Reader is closed and counts a call
// on the Reader, which the caller releases. s.mu is held.
func (s *Sequential) enter() error {
	if s.closed {
		return ErrClosed
	}
	return s.r.c.Acquire()
}

// holds reports whether off lies in what the window has read or is
// reading.
func (s *Sequential) holds(off int64) bool {
	return s.used > 0 && s.slots[s.head].off <= off && off < s.ahead
}

// window copies the file at off into p from the read-ahead, starting it
// at off if it does not hold off. At Size it returns what there is and
// io.EOF.
func (s *Sequential) window(p []byte, off int64) (int, error) {
	want := p
	atEnd := false
	if rest := s.r.c.Size() - off; int64(len(p)) > rest {
		want, atEnd = p[:rest], true
	}
	n := 0
	for n < len(want) {
		b, err := s.next(off + int64(n))
		if err != nil {
			return n, err
		}
		n += copy(want[n:], b)
	}
	s.lastEnd = off + int64(n)
	if atEnd {
		return n, io.EOF
	}
	return n, nil
}

// next returns the bytes the window holds from off on, up to the end of
// one window and Size, waiting for its read, dropping the windows before
// off and starting new reads into them. off is below Size.
func (s *Sequential) next(off int64) ([]byte, error) {
	if err := s.start(); err != nil {
		return nil, err
	}
	if !s.holds(off) {
		s.restart(off)
	}
	for {
		w := &s.slots[s.head]
		if w.inflight {
			s.await(w)
		}
		if reader.UnsplitEIO(w.err) {
			// Read the window again sector by sector, as the Reader's
			// ReadAt does: an EIO that passes costs nothing, and a
			// latent sector error leaves the window the bytes before
			// the bad sectors and an error naming them (a
			// *direct.SectorError), reported once those are read.
			w.n, w.err = reader.EndOK(s.r.c.File().ReadAt(w.buf[:w.want], w.off))
		}
		end := w.off + int64(w.n)
		if w.err != nil && off >= end {
			// Past the bytes before bad sectors, if any.
			err := fmt.Errorf("fileio: reading %s at %d: %w", s.r.c.Path(), end, w.err)
			s.drain() // the next call tries again
			return nil, err
		}
		if off < end {
			b := w.buf[off-w.off : w.n]
			if lim := s.r.c.Size() - off; int64(len(b)) > lim {
				b = b[:lim]
			}
			s.fill()
			return b, nil
		}
		if w.n < w.want {
			// The file ends before Size: a bound past the file's end.
			err := fmt.Errorf("fileio: reading %s at %d: file ends at %d: %w", s.r.c.Path(), off, end, io.ErrUnexpectedEOF)
			s.drain()
			return nil, err
		}
		// Consumed: give the window back to the ring.
		s.head = (s.head + 1) % len(s.slots)
		s.used--
		if s.used == 0 {
			s.restart(off)
		} else {
			s.fill()
		}
	}
}

// start sets the ring up on first use: its buffers, in one slab, and a
// queue as deep as the ring.
func (s *Sequential) start() error {
	if s.started {
		return nil
	}
	r := s.r
	read := min(maxSeqRead, r.readAhead)
	read = aligned.Up(read, int(r.c.Block()))
	ring := r.readAhead/read + 1 // one consumed while the rest are read
	slab, err := aligned.NewLazy(ring*read, r.c.MemAlign())
	if err != nil {
		return err
	}
	q, err := r.c.File().NewQueue(&direct.QueueOptions{Depth: ring})
	if err != nil {
		slab.Free()
		return err
	}
	mem := slab.Bytes()
	s.slab, s.q = slab, q
	s.slots = make([]seqSlot, ring)
	s.batch = make([]direct.Request, 0, ring)
	for i := range s.slots {
		s.slots[i] = seqSlot{buf: mem[i*read : (i+1)*read : (i+1)*read], done: make(chan direct.Completion, 1)}
	}
	s.started = true
	return nil
}

// restart drops the windows and starts reading ahead at off.
func (s *Sequential) restart(off int64) {
	s.drain()
	s.ahead = aligned.Down(off, s.r.c.Align())
	s.grow = min(firstSeqRead, len(s.slots[0].buf))
	s.fill()
}

// fill starts reads into the free windows, each where the last ends, up
// to Size. The reads it starts together (the window opening, or refilling
// after the caller caught up) go to the queue as one batch: one
// io_uring_enter on the io_uring engine, not one each. When the queue
// refuses part of the batch, the first window refused holds the error,
// which next reports when the caller gets there, and the windows after it
// are given back.
func (s *Sequential) fill() {
	if s.used > 0 {
		if w := &s.slots[(s.head+s.used-1)%len(s.slots)]; !w.inflight && w.err != nil {
			return // the stream stops at the error, which next reports
		}
	}
	end := aligned.Up(s.r.c.Size(), s.r.c.Align())
	first := s.used // the first window this call starts, from head
	s.batch = s.batch[:0]
	for s.used < len(s.slots) && s.ahead < end {
		w := &s.slots[(s.head+s.used)%len(s.slots)]
		w.off, w.n, w.err = s.ahead, 0, nil
		w.want = int(min(int64(s.grow), end-s.ahead))
		w.inflight = true
		s.used++
		s.ahead += int64(w.want)
		s.grow = min(2*s.grow, len(w.buf))
		s.batch = append(s.batch, direct.Request{Op: direct.OpRead, Buf: w.buf[:w.want], Off: w.off, Done: w.done})
	}
	if len(s.batch) == 0 {
		return
	}
	k, err := direct.SubmitBatch(s.q, s.batch)
	clear(s.batch) // drop the buffers' references
	if err == nil {
		return
	}
	w := &s.slots[(s.head+first+k)%len(s.slots)]
	w.inflight, w.err = false, err
	for i := first + k + 1; i < s.used; i++ {
		s.slots[(s.head+i)%len(s.slots)].inflight = false
	}
	s.used = first + k + 1
	s.ahead = w.off + int64(w.want)
}

// await waits for w's read.
func (s *Sequential) await(w *seqSlot) {
	c := s.q.Await(w.done)
	w.inflight = false
	w.n, w.err = reader.EndOK(c.N, c.Err)
	if errors.Is(w.err, io.EOF) {
		w.err = nil
	}
}

// drain waits for the reads in flight and empties the ring.
func (s *Sequential) drain() {
	for i := range s.used {
		if w := &s.slots[(s.head+i)%len(s.slots)]; w.inflight {
			s.await(w)
		}
	}
	s.head, s.used = 0, 0
}

// Close waits for the reads in flight and releases the buffers. Later
// calls return ErrClosed, as does a second Close.
func (s *Sequential) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.finish()
	s.r.c.Untrack(s)
	return nil
}

// closeByReader closes s for its Reader's Close.
func (s *Sequential) closeByReader() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.finish()
	}
}

// finish releases s. s.mu is held.
func (s *Sequential) finish() {
	s.closed = true
	if !s.started {
		return
	}
	s.drain()
	s.q.Close()
	s.slab.Free()
	s.slots = nil
}
