package blobio

import (
	"fmt"
	"io"

	"github.com/dio-storage/dio/aligned"
)

// ReadAt reads len(p) bytes of the file at off, as io.ReaderAt does: the
// logical bytes, headers and all, up to Size, through aligned reads
// whatever the I/O path. So a Reader composes with io.SectionReader and
// friends. At Size it returns the bytes there are and io.EOF. It is safe
// for concurrent use, beside ReadBlob and ReadBlobs.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	if err := r.acquire(); err != nil {
		return 0, err
	}
	defer r.release()
	if off < 0 {
		return 0, fmt.Errorf("%w: ReadAt at negative offset %d", ErrOffset, off)
	}
	if off >= r.size {
		return 0, io.EOF
	}
	want, atEnd := p, false
	if rest := r.size - off; int64(len(p)) >= rest {
		want, atEnd = p[:rest], true
	}
	b, err := r.large.getAny()
	if err != nil {
		return 0, err
	}
	defer r.large.put(b)
	buf := b.buf.Bytes()
	span := aligned.Down(int64(len(buf)), r.align) // whole aligned reads per turn
	n := 0
	for n < len(want) {
		pos := off + int64(n)
		lo := aligned.Down(pos, r.align)
		hi := min(aligned.Up(off+int64(len(want)), r.align), lo+span)
		m, err := r.read(b.done, buf[:hi-lo], lo)
		if err != nil {
			return n, fmt.Errorf("blobio: reading at %d: %w", pos, err)
		}
		if lo+int64(m) <= pos {
			// Shorter than Size: a bound past the file's end.
			return n, fmt.Errorf("blobio: reading at %d: file ends at %d: %w", pos, lo+int64(m), io.ErrUnexpectedEOF)
		}
		n += copy(want[n:], buf[pos-lo:m])
	}
	if atEnd {
		return n, io.EOF
	}
	return n, nil
}
