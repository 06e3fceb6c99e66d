package blobio

import "io"

// ReadAt reads len(p) bytes of the file at off, as io.ReaderAt does: the
// logical bytes, headers and all, up to Size, through the aligned reads of
// the reader core underneath, whatever the I/O path. So a Reader
// composes with io.SectionReader and friends. At Size it returns the
// bytes there are and io.EOF. It is safe for concurrent use, beside
// ReadBlob and ReadBlobs.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	if err := r.c.Acquire(); err != nil {
		return 0, err
	}
	defer r.c.Release()
	if off >= 0 && off >= r.c.Size() {
		return 0, io.EOF
	}
	n, err := r.c.ReadAtHeld(p, off)
	if err == nil && off+int64(n) >= r.c.Size() {
		err = io.EOF // at Size, even when p ends there
	}
	return n, err
}
