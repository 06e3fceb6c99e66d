package appender

import (
	"errors"
	"fmt"
	"io"

	"github.com/dio-storage/dio/aligned"
)

// Resume returns an Appender continuing f at logical size size, a size
// made durable before (a Synced recorded before a crash, or the size a
// clean Close left): it cuts off whatever f holds past size, reads the
// unaligned last block back into the first buffer, as Flush's refit keeps
// it, and appends from there, so that the next byte lands at size. Synced
// starts at size. A size below zero or past f's end gives an error
// matching ErrInvalid, and f is left as it was; on any error the caller
// closes f.
func Resume(f File, size int64, o Options) (*Appender, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if size < 0 || size > st.Size() {
		return nil, invalid("size %d is outside the file's %d bytes", size, st.Size())
	}
	ap, err := New(f, o)
	if err != nil {
		return nil, err
	}
	if err := ap.resume(size); err != nil {
		ap.release()
		return nil, err
	}
	return ap, nil
}

func (a *Appender) resume(size int64) error {
	// Cut first, so that the block read back ends at size: past it lie
	// torn blobs and the zeros a crash left grown ahead.
	if err := a.f.Truncate(size); err != nil {
		return err
	}
	whole := aligned.Down(size, int64(a.align))
	s := &a.slots[a.cur]
	s.off, s.n = whole, int(size-whole)
	if s.n > 0 {
		// Touched first: the slab's pages are committed lazily, and a
		// direct read into a page not yet there is btrfs' slow path.
		clear(s.buf[:a.align])
		n, err := a.f.ReadAt(s.buf[:a.align], whole)
		if errors.Is(err, io.EOF) && n >= s.n {
			err = nil
		}
		if err == nil && n < s.n {
			err = fmt.Errorf("appender: reading the last block at %d: %d of %d bytes: %w", whole, n, s.n, io.ErrUnexpectedEOF)
		}
		if err != nil {
			return err
		}
	}
	a.size, a.synced, a.fileSize = size, size, size
	return nil
}
