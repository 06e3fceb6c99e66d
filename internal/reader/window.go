package reader

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
)

// A Window reads a file from front to back ahead of its caller: a ring
// of buffers, each holding one read, the oldest being consumed while the
// rest are in flight. Reads start at First bytes after a start or a jump
// and double up to Max, so that a short scan (a footer, an index block)
// reads little more than it asked for, as RocksDB's readahead grows from
// 8 KiB for the same reason; the reads that open the window go to the
// queue in one batch (one io_uring_enter), and each read consumed is
// replaced by one further on. It is fileio's Sequential, blobio's Scanner
// and ephemeral's sequential readers, each with sizes of its own.
//
// A window read that fails with EIO is read again sector by sector when
// the caller reaches it, as Read does: an EIO that passes costs nothing,
// and a latent sector error leaves the window the bytes before the bad
// sectors and, past them, an error naming them (a *direct.SectorError).
//
// A Window is for one goroutine at a time: its owner serialises the
// calls. Nothing is read, and no memory taken, until the first Next or
// Start.
type Window struct {
	src  io.ReaderAt   // what reads read: the file, or a caller's ReaderAt
	file fallback.File // the file, whose queue reads go through; nil: src is read in the caller's thread
	name string        // the face's package, and the file, for errors
	path string

	align int64 // offset alignment of the reads
	memAl int
	first int // the first read's length after a start or a jump
	max   int // the longest read, and each buffer's size
	size  int64

	q     direct.Queue
	slab  *aligned.Buffer
	slots []slot           // the ring of reads
	head  int              // the oldest, the one being consumed
	used  int              // reads done or in flight, from head
	ahead int64            // where the next read starts: the end of what is read ahead
	grow  int              // the next read's length
	batch []direct.Request // fill's reads, submitted together
}

// slot is one read: a buffer and the stretch of the file it holds.
type slot struct {
	buf      []byte
	off      int64
	want     int   // bytes asked of the device
	lim      int64 // the Window's size when the read started: its bytes count up to there
	n        int   // bytes it gave, once done, up to lim
	err      error
	inflight bool
	done     chan direct.Completion
}

// WindowOptions size a Window: reads of First bytes after a start or a
// jump, doubling up to Max, Ring of them at once (one being consumed
// while the rest are read); every size is rounded up to the file's
// alignment.
type WindowOptions struct {
	First, Max, Ring int
}

// NewWindow returns a Window over the Reader's file, reading up to its
// Size.
func (r *Reader) NewWindow(o WindowOptions) *Window {
	return newWindow(r.f, r.f, r.name, r.path, r.align, r.block, r.memAl, r.size, o)
}

// NewWindowReaderAt returns a Window over ra, up to size: reads run in
// the caller's thread, one at a time, as the window needs them, with no
// alignment (blobio's Scanner over an io.ReaderAt).
func NewWindowReaderAt(ra io.ReaderAt, size int64, name string, o WindowOptions) *Window {
	return newWindow(ra, nil, name, "an io.ReaderAt", 1, 1, os.Getpagesize(), size, o)
}

func newWindow(src io.ReaderAt, f fallback.File, name, path string, align, block int64, memAl int, size int64, o WindowOptions) *Window {
	read := aligned.Up(max(o.Max, 1), int(block))
	return &Window{
		src: src, file: f, name: name, path: path,
		align: align, memAl: memAl, size: size,
		first: aligned.Up(min(max(o.First, 1), read), int(block)),
		max:   read,
		slots: make([]slot, max(o.Ring, 1)),
	}
}

// Size returns where the Window's reads end: the Reader's Size, or what
// SetSize set.
func (w *Window) Size() int64 { return w.size }

// SetSize moves where the reads end, for a file that grows (ephemeral's,
// whose bytes are final on disk up to a point that moves on): reads
// already done or in flight keep the bytes they had, up to the size they
// were started with.
func (w *Window) SetSize(size int64) { w.size = size }

// Holds reports whether off lies in what the window has read or is
// reading.
func (w *Window) Holds(off int64) bool {
	return w.used > 0 && w.slots[w.head].off <= off && off < w.ahead
}

// Frontier returns where the bytes the window has read stop, from the
// read being consumed on: the start of the first read still in flight
// (or failed), else the end of the last. A reader that goes on from
// there is sequential. -1 when the window holds nothing.
func (w *Window) Frontier() int64 {
	end := int64(-1)
	for i := range w.used {
		s := &w.slots[(w.head+i)%len(w.slots)]
		if s.inflight || s.err != nil {
			return s.off
		}
		if end = s.off + int64(s.n); s.n < s.want {
			break
		}
	}
	return end
}

// Grown reports whether the window's reads have reached their longest:
// a scan's, not a few reads that happened to follow each other.
func (w *Window) Grown() bool { return w.grow == w.max }

// Peek returns the bytes from off to the end of its read, if a read that
// is done holds them, without moving the window or waiting; else nil.
func (w *Window) Peek(off int64) []byte {
	for i := range w.used {
		s := &w.slots[(w.head+i)%len(w.slots)]
		if s.inflight || s.err != nil {
			return nil
		}
		if s.off <= off && off < s.off+int64(s.n) {
			return s.buf[off-s.off : s.n]
		}
	}
	return nil
}

// Start drops what the window holds and starts reading ahead at off,
// the opening reads in one batch. It returns the error of a read the
// queue refused, which Next also reports when the caller reaches it, for
// a caller that would rather fail at once (blobio's Scanner).
func (w *Window) Start(off int64) error {
	if err := w.setup(); err != nil {
		return err
	}
	w.restart(off)
	if w.used > 0 {
		if s := &w.slots[(w.head+w.used-1)%len(w.slots)]; !s.inflight {
			return s.err
		}
	}
	return nil
}

// Next returns the bytes the window holds from off on, up to the end of
// one read and Size, waiting for that read, dropping the reads before
// off and starting new ones into them; a window that does not hold off
// starts again there. off is below Size. An error is returned once the
// caller has every byte before it; the window is then emptied, and the
// next call tries again.
func (w *Window) Next(off int64) ([]byte, error) {
	if err := w.setup(); err != nil {
		return nil, err
	}
	if !w.Holds(off) {
		w.restart(off)
	}
	for {
		if w.used == 0 {
			return nil, w.errorf("reading %s at %d: nothing to read before %d: %w", w.path, off, w.size, io.ErrUnexpectedEOF)
		}
		s := &w.slots[w.head]
		if s.inflight {
			w.await(s)
		}
		if w.file != nil && UnsplitEIO(s.err) {
			s.record(EndOK(w.file.ReadAt(s.buf[:s.want], s.off)))
		}
		end := s.off + int64(s.n)
		switch {
		case s.err != nil && off >= end:
			// Past the bytes before bad sectors, if any.
			err := w.errorf("reading %s at %d: %w", w.path, end, s.err)
			w.Drain()
			return nil, err
		case off < end:
			w.fill()
			return s.buf[off-s.off : s.n], nil
		case end < s.lim && s.n < s.want:
			// The file ends before Size: a bound past the file's end.
			err := w.errorf("reading %s at %d: file ends at %d: %w", w.path, off, end, io.ErrUnexpectedEOF)
			w.Drain()
			return nil, err
		case s.n < s.want:
			// Cut short by a size that has moved on since (SetSize):
			// read on from off.
			w.restart(off)
			continue
		}
		// Consumed: give the read back to the ring.
		w.head = (w.head + 1) % len(w.slots)
		w.used--
		switch {
		case w.used > 0:
			w.fill()
		case w.ahead == aligned.Down(off, w.align):
			w.fill() // a file that grew past where the reads had stopped
		default:
			w.restart(off)
		}
	}
}

func (w *Window) errorf(format string, args ...any) error {
	return fmt.Errorf(w.name+": "+format, args...)
}

// setup makes the ring on first use: its buffers, in one slab, and a
// queue as deep as the ring. The slab's pages are committed at once
// (aligned.New), not as reads first land in them: btrfs reads the rest
// of a direct read through its page cache when the buffer's pages are
// not there (a lazily mapped window left 1-3 MiB of an 8 MiB scan cached
// on this machine's btrfs, none populated), and one populating map costs
// less than a fault a page (a 32 MiB scan of 100-byte blobs ran 17%
// slower touching each page first).
func (w *Window) setup() error {
	if w.slab != nil {
		return nil
	}
	ring := len(w.slots)
	slab, err := aligned.New(ring*w.max, w.memAl)
	if err != nil {
		return err
	}
	if w.file != nil {
		q, err := w.file.NewQueue(&direct.QueueOptions{Depth: ring})
		if err != nil {
			slab.Free()
			return err
		}
		w.q = q
	}
	mem := slab.Bytes()
	w.slab = slab
	w.batch = make([]direct.Request, 0, ring)
	for i := range w.slots {
		w.slots[i] = slot{buf: mem[i*w.max : (i+1)*w.max : (i+1)*w.max], done: make(chan direct.Completion, 1)}
	}
	return nil
}

// restart drops the reads and starts reading ahead at off.
func (w *Window) restart(off int64) {
	w.Drain()
	w.ahead = aligned.Down(off, w.align)
	w.grow = w.first
	w.fill()
}

// fill starts reads into the free buffers, each where the last ends, up
// to Size. The reads it starts together (the window opening, or
// refilling after the caller caught up) go to the queue as one batch:
// one io_uring_enter on the io_uring engine, not one each. When the
// queue refuses part of the batch, the first read refused holds the
// error, which Next reports when the caller gets there, and the reads
// after it are given back. Over a plain io.ReaderAt the reads run here,
// one after another.
func (w *Window) fill() {
	if w.used > 0 {
		if s := &w.slots[(w.head+w.used-1)%len(w.slots)]; !s.inflight && s.err != nil {
			return // the stream stops at the error, which Next reports
		}
	}
	end := aligned.Up(w.size, w.align)
	first := w.used // the first read this call starts, from head
	w.batch = w.batch[:0]
	for w.used < len(w.slots) && w.ahead < end {
		s := &w.slots[(w.head+w.used)%len(w.slots)]
		s.off, s.n, s.err, s.lim = w.ahead, 0, nil, w.size
		s.want = int(min(int64(w.grow), end-w.ahead))
		w.used++
		w.ahead += int64(s.want)
		w.grow = min(2*w.grow, w.max)
		if w.q == nil {
			s.record(EndOK(w.src.ReadAt(s.buf[:s.want], s.off)))
			continue
		}
		s.inflight = true
		w.batch = append(w.batch, direct.Request{Op: direct.OpRead, Buf: s.buf[:s.want], Off: s.off, Done: s.done})
	}
	if len(w.batch) == 0 {
		return
	}
	k, err := direct.SubmitBatch(w.q, w.batch)
	clear(w.batch) // drop the buffers' references
	if err == nil {
		return
	}
	s := &w.slots[(w.head+first+k)%len(w.slots)]
	s.inflight, s.err = false, err
	for i := first + k + 1; i < w.used; i++ {
		w.slots[(w.head+i)%len(w.slots)].inflight = false
	}
	w.used = first + k + 1
	w.ahead = s.off + int64(s.want)
}

// await waits for s's read.
func (w *Window) await(s *slot) {
	c := w.q.Await(s.done)
	s.inflight = false
	s.record(EndOK(c.N, c.Err))
}

// record records what s's read gave: n bytes, those up to s.lim, and err.
func (s *slot) record(n int, err error) {
	if errors.Is(err, io.EOF) {
		err = nil
	}
	s.n, s.err = int(min(int64(n), s.lim-s.off)), err
}

// Drain waits for the reads in flight and empties the ring.
func (w *Window) Drain() {
	for i := range w.used {
		if s := &w.slots[(w.head+i)%len(w.slots)]; s.inflight {
			w.await(s)
		}
	}
	w.head, w.used = 0, 0
}

// InFlight reports whether any read is in flight, for tests.
func (w *Window) InFlight() bool {
	for _, s := range w.slots {
		if s.inflight {
			return true
		}
	}
	return false
}

// Allocated reports whether the window holds its buffers: from its first
// read until Close.
func (w *Window) Allocated() bool { return w.slab != nil }

// Ring returns how many reads the window holds at once.
func (w *Window) Ring() int { return len(w.slots) }

// SetQueue replaces the window's queue by wrap of it, setting the window
// up first, for tests that count what goes into it.
func (w *Window) SetQueue(wrap func(direct.Queue) direct.Queue) error {
	if err := w.setup(); err != nil {
		return err
	}
	w.q = wrap(w.q)
	return nil
}

// Close waits for the reads in flight and releases the buffers and the
// queue. The Window may be used again: it sets itself up anew.
func (w *Window) Close() {
	if w.slab == nil {
		return
	}
	w.Drain()
	if w.q != nil {
		w.q.Close()
		w.q = nil
	}
	w.slab.Free()
	w.slab = nil
	for i := range w.slots {
		w.slots[i] = slot{}
	}
}
