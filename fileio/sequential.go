package fileio

import (
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
	w  *reader.Window // the reader core's read-ahead window

	pos     int64 // Read's position
	lastEnd int64 // where the last read ended, to tell a sequential ReadAt
	closed  bool
}

// NewSequential returns a Sequential over r starting at off, for Read.
// Nothing is read, and no memory taken, until its first read.
func (r *Reader) NewSequential(off int64) (*Sequential, error) {
	if off < 0 {
		return nil, fmt.Errorf("%w: Sequential at negative offset %d", ErrOffset, off)
	}
	read := aligned.Up(min(maxSeqRead, r.readAhead), int(r.c.Block()))
	s := &Sequential{r: r, pos: off, lastEnd: off, w: r.c.NewWindow(reader.WindowOptions{
		First: firstSeqRead, Max: read, Ring: r.readAhead/read + 1, // one consumed while the rest are read
	})}
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
	if !s.w.Holds(off) && !(off >= s.lastEnd && off-s.lastEnd <= maxSeqRead) {
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
	if rest := s.r.c.Size() - s.pos; rest > 0 {
		s.r.c.Meter().Asked(direct.OpRead, int(rest)) // one call asking for the rest
	}
	for s.pos < s.r.c.Size() {
		b, err := s.w.Next(s.pos)
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

// window copies the file at off into p from the read-ahead, starting it
// at off if it does not hold off, and counts the call as a read asked
// for. At Size it returns what there is and io.EOF.
func (s *Sequential) window(p []byte, off int64) (int, error) {
	s.r.c.Meter().Asked(direct.OpRead, len(p))
	want := p
	atEnd := false
	if rest := s.r.c.Size() - off; int64(len(p)) > rest {
		want, atEnd = p[:rest], true
	}
	n := 0
	for n < len(want) {
		b, err := s.w.Next(off + int64(n))
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
	s.w.Close()
}
