package reader

import (
	"fmt"
	"io"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
)

// ReadAt reads len(p) bytes at off, as io.ReaderAt and os.File do: a
// read that Size cuts short returns the bytes there are and io.EOF (one
// that ends exactly at Size, nil), an empty p returns 0 and nil wherever
// off is, and a negative off gives an error matching Options.Offset. Any
// offset and length: the range is read rounded out to the file's
// alignment, in reads of up to LargeRead, several in flight at once for
// a long p on io_uring. It is safe for concurrent use, and allocates
// nothing when it succeeds.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	if err := r.Acquire(); err != nil {
		return 0, err
	}
	defer r.Release()
	return r.ReadAtHeld(p, off)
}

// ReadAtHeld is ReadAt for a caller that holds an Acquire.
func (r *Reader) ReadAtHeld(p []byte, off int64) (int, error) {
	return r.readAtHeld(p, off, r.ReadSpan)
}

// readAtHeld is ReadAtHeld reading the part of p the file holds with
// span, which reads exactly len(want) bytes at off.
func (r *Reader) readAtHeld(p []byte, off int64, span func(want []byte, off int64) (int, error)) (int, error) {
	switch {
	case off < 0:
		return 0, fmt.Errorf("%w: ReadAt at negative offset %d", r.offsetEr, off)
	case len(p) == 0:
		return 0, nil
	case off >= r.size:
		return 0, io.EOF
	}
	r.meter.Asked(direct.OpRead, len(p))
	want, atEnd := p, false
	if rest := r.size - off; int64(len(p)) > rest {
		want, atEnd = p[:rest], true
	}
	n, err := span(want, off)
	if err == nil && atEnd {
		err = io.EOF
	}
	return n, err
}

// ReadSpan reads exactly len(p) bytes at off, which the file holds: the
// range rounded out to the alignment, through one pooled buffer when it
// fits a large one (or the file is not on io_uring), else in pieces in
// flight together (readMany). A file that ends before off+len(p) gives
// an error matching io.ErrUnexpectedEOF.
func (r *Reader) ReadSpan(p []byte, off int64) (int, error) {
	lo := aligned.Down(off, r.align)
	hi := aligned.Up(off+int64(len(p)), r.align)
	if span := hi - lo; span <= int64(r.small.Size()) {
		return r.readVia(r.small, p, off)
	} else if span <= int64(r.large.Size()) || !r.uring {
		return r.readVia(r.large, p, off)
	}
	return r.readMany(p, off)
}

// readVia reads want at off through one buffer of pool, in turns of the
// buffer's size.
func (r *Reader) readVia(pool *Pool, want []byte, off int64) (int, error) {
	b, err := pool.GetAny()
	if err != nil {
		return 0, err
	}
	defer pool.Put(b)
	buf := b.Buf.Bytes()
	span := aligned.Down(int64(len(buf)), r.align) // whole aligned reads per turn
	n := 0
	for n < len(want) {
		pos := off + int64(n)
		lo := aligned.Down(pos, r.align)
		hi := min(aligned.Up(off+int64(len(want)), r.align), lo+span)
		m, err := r.Read(b.Done, buf[:hi-lo], lo)
		if err != nil {
			if int64(m) > pos-lo { // the bytes before bad sectors (direct.SectorError)
				n += copy(want[n:], buf[pos-lo:m])
			}
			return n, r.errorf("reading %s at %d: %w", r.path, pos, err)
		}
		if lo+int64(m) <= pos {
			// Shorter than Size: a bound past the file's end.
			return n, r.errorf("reading %s at %d: %s: %w", r.path, pos, fileEnds(lo, m), io.ErrUnexpectedEOF)
		}
		n += copy(want[n:], buf[pos-lo:m])
	}
	return n, nil
}

// ReadInto is ReadAt into memory the kernel may write itself: when off
// and len(p) are multiples of the file's alignment and p's address of its
// memory alignment, the read goes straight into p, with no pooled buffer
// and no copy (RocksDB's RandomAccessFileReader reads an aligned scratch
// the same way); otherwise it is ReadAt. p must be memory that stays
// where it is while the read is in flight, an aligned.Buffer's: a Go
// slice may live on a goroutine's stack, which moves. Past the end of the
// file (or Options.Size) the bytes of p's aligned tail are unspecified.
func (r *Reader) ReadInto(p []byte, off int64) (int, error) {
	if err := r.Acquire(); err != nil {
		return 0, err
	}
	defer r.Release()
	if !aligned.IsAligned(off, r.align) || !aligned.IsAligned(int64(len(p)), r.align) || !aligned.IsSliceAligned(p, r.memAl) {
		return r.ReadAtHeld(p, off)
	}
	return r.readAtHeld(p, off, r.readStraight)
}

// readStraight reads exactly len(want) bytes at off, which the file
// holds, into want's own memory, in one read of its aligned length:
// want is ReadInto's aligned p, cut at the file's end, so its capacity
// holds the rounding up.
func (r *Reader) readStraight(want []byte, off int64) (int, error) {
	m, err := r.Read(make(chan direct.Completion, 1), want[:aligned.Up(int64(len(want)), r.align)], off)
	n := min(m, len(want))
	switch {
	case err != nil:
		return n, r.errorf("reading %s at %d: %w", r.path, off+int64(n), err)
	case m < len(want):
		return n, r.errorf("reading %s at %d: %s: %w", r.path, off, fileEnds(off, m), io.ErrUnexpectedEOF)
	}
	return n, nil
}

// fileEnds says where a file ends that a read at off returned m bytes
// of, short: at off+m, or, when the read found nothing, somewhere before
// off (a file that shrank under its Reader).
func fileEnds(off int64, m int) string {
	if m == 0 {
		return fmt.Sprintf("file ends before %d", off)
	}
	return fmt.Sprintf("file ends at %d", off+int64(m))
}
