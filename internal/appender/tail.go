package appender

import "github.com/dio-storage/dio/aligned"

// The tail policy: how a stream whose length is not a multiple of the
// alignment is written with writes that all are, so that the file never
// holds a gap and no write is read-modify-write. A flush pads the
// partial last buffer (padTail), keeps its unaligned tail to be written
// again by the next flush (refit), and Close cuts the padding, and what
// was grown ahead, off (trimTo), or, when it fails, everything past
// Synced (cutBack).

// padTail zeroes buf from n up to the offset alignment and returns the
// length to write: the partial last block goes out whole, its padding
// rewritten by the next flush or cut off by Close.
func (a *Appender) padTail(buf []byte, n int) int {
	return aligned.PadZero(buf, n, a.align)
}

// refit, after a flush of the filling slot s, keeps only its unaligned
// tail, moved to the front of the buffer at the block's offset, so that
// the next flush rewrites that block with the tail and what follows; the
// aligned part before it is on disk for good. The caller holds a.mu.
func (a *Appender) refit(s *slot) {
	if whole := aligned.Down(s.n, a.align); whole > 0 {
		copy(s.buf, s.buf[whole:s.n])
		s.off += int64(whole)
		s.n -= whole
	}
}

// trimTo truncates the file to size when it runs past it: at Close, to
// the logical size, so that the padding and what was grown ahead go.
func (a *Appender) trimTo(size int64) error {
	if a.fileSize <= size && !a.longer {
		return nil
	}
	if err := a.f.Truncate(size); err != nil {
		return a.fail(err)
	}
	a.fileSize, a.longer = size, false
	return nil
}

// cutBack, after a failed Close, truncates the file to Synced whatever
// its size is thought to be (a failed fallocate or write may have left it
// longer), so that bytes never made durable go too, and fdatasyncs the
// cut, or a power cut could bring the tail back. Best effort: the error
// Close reports is the first one.
func (a *Appender) cutBack() {
	if a.f.Truncate(a.synced) == nil {
		a.fileSize = a.synced
		a.f.Sync()
	}
}
