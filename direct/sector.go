package direct

import (
	"errors"
	"fmt"
	"io"
	"syscall"
)

// Latent sector errors. A disk that cannot read one sector fails the
// whole read that covers it with EIO, though every other byte of the
// range is fine. ReadAt therefore reads a range that failed with EIO
// again one sector at a time (TigerBeetle does the same to find the bad
// sector), so that the caller gets every byte that can be read and an
// error naming the bytes that cannot.

// SectorError reports a run of sectors that could not be read (EIO)
// while the rest of the range around them was. errors.Is(err,
// syscall.EIO) holds for it.
type SectorError struct {
	Off int64 // the first byte that could not be read
	Len int   // how many bytes from Off: whole sectors, cut to the range read
	Err error // the sectors' error, naming the operation and file
}

func (e *SectorError) Error() string {
	return fmt.Sprintf("direct: bytes [%d, %d) unreadable, a bad sector: %v", e.Off, e.Off+int64(e.Len), e.Err)
}

// Unwrap returns the sectors' error, so that errors.Is(err, syscall.EIO)
// holds.
func (e *SectorError) Unwrap() error { return e.Err }

// minSector is the smallest sector a disk reads: where the file's
// alignment says nothing smaller matters (the page cache's {1, 1}), a
// range is split into 512-byte pieces, which a disk reads or fails whole.
const minSector = 512

// ReadSectors reads p at off in pieces of sector bytes (the first piece
// cut to end at a multiple of sector) with read, after a read of the
// whole range failed with EIO. A piece that fails with EIO is zeroed and
// the reading goes on; other errors end it. It returns n, the bytes at
// the start of p read before the first bad piece (p[:n] is good, as
// io.ReaderAt means it), having also read every good piece after it into
// p; and nil, io.EOF where the file ended, or one *SectorError per run of
// bad pieces (joined with errors.Join when there are several). read is
// the file's ReadAt (or a queue's read), sector its alignment's Offset;
// p and off keep to the alignment when read demands it.
func ReadSectors(read func(p []byte, off int64) (int, error), p []byte, off int64, sector int) (int, error) {
	if sector <= 0 {
		sector = minSector
	}
	var bad []error
	var run *SectorError
	n, good := 0, true
	for pos := 0; pos < len(p); {
		end := min(len(p), pos+sector-int((off+int64(pos))%int64(sector)))
		piece := p[pos:end]
		m, err := read(piece, off+int64(pos))
		switch {
		case errors.Is(err, syscall.EIO):
			clear(piece)
			if run != nil && run.Off+int64(run.Len) == off+int64(pos) {
				run.Len += len(piece)
			} else {
				run = &SectorError{Off: off + int64(pos), Len: len(piece), Err: err}
				bad = append(bad, run)
			}
			good = false
		case err != nil && err != io.EOF:
			return n, errors.Join(append(bad, err)...)
		case m < len(piece):
			if good {
				n += m
			}
			if len(bad) > 0 {
				return n, errors.Join(bad...)
			}
			return n, io.EOF
		default:
			if good {
				n += m
			}
		}
		pos = end
	}
	if len(bad) == 1 {
		return n, bad[0]
	}
	return n, errors.Join(bad...)
}

// splitRead is ReadAt's answer to a read of p at off that failed with
// err, EIO, after its first n bytes: the rest is read again sector by
// sector.
func (f *File) splitRead(p []byte, off int64, n int, err error) (int, error) {
	sector := max(f.align.Offset, minSector)
	start := n - n%sector
	if f.align.Offset == 1 {
		start = n // the page cache: the pieces need not be aligned
	}
	m, serr := ReadSectors(f.readAt, p[start:], off+int64(start), sector)
	if bad := badSectors(serr, sector); bad > 0 {
		f.sectorsBad(bad)
	}
	return start + m, serr
}

// badSectors counts the sectors of size sector that the *SectorErrors in
// err (one, or several joined) name.
func badSectors(err error, sector int) int {
	if se, ok := err.(*SectorError); ok {
		return (se.Len + sector - 1) / sector
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return 0
	}
	n := 0
	for _, e := range joined.Unwrap() {
		n += badSectors(e, sector)
	}
	return n
}
