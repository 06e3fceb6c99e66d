package blobio

import (
	"fmt"
	"io"
	"sync"

	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/internal/reader"
)

// A Scanner walks every blob of a file in order, like bufio.Scanner walks
// lines. It reads through the reader core's read-ahead window (the one
// fileio's Sequential reads through): whole aligned reads, the next one
// in flight while the current one is parsed. A Scanner's resources are
// released when Scan returns false, by Close, or when its Reader is
// closed. A Scanner is for one goroutine; its Reader may be closed from
// another.
type Scanner struct {
	r  *Reader        // the Reader scanned, or nil for NewScannerReaderAt's
	mu sync.Mutex     // held by Scan, and by the Reader's Close finishing it
	w  *reader.Window // reads DefaultScanRead (or Options.BufferSize) at a time, one ahead

	start   int64 // offset of the first blob
	size    int64 // where the blobs end
	bounded bool  // size is a logical size: a 0x00 byte is an empty blob
	sum     bool  // the Reader checks seals (Options.Checksum)
	torn    bool  // the scan ended at a torn blob (see Torn)
	dec     *decoderPool
	started bool // the window started reading

	pos     int64 // offset of the next blob
	off     int64 // offset of the current blob
	blob    []byte
	cur     []byte // the window's bytes from curOff to the end of the read the scan is in
	curOff  int64
	scratch []byte // a blob straddling reads, assembled
	decoded []byte
	err     error
	ended   bool
}

// DefaultScanRead is how much a Scanner reads at a time when Options leave
// BufferSize unset: on the disks measured here every request costs as
// much as tens of kilobytes of transfer, and a 32 MiB scan of 100-byte
// blobs ran in 26 ms with 512 KiB reads against 57 ms with 64 KiB ones
// (io_uring; BenchmarkScanner).
const DefaultScanRead = 512 << 10

// scanWindow sizes a Scanner's window: reads of read bytes, one parsed
// while the next is in flight.
func scanWindow(read int) reader.WindowOptions {
	return reader.WindowOptions{First: read, Max: read, Ring: 2}
}

// NewScanner returns a Scanner over r's blobs, starting at offset 0.
//
// Over a Reader opened without Options.Size, a 0x00 byte where a header is
// due ends the scan, with Err() == nil: dio's writer never writes one there
// (an empty blob has a 4-byte header), so it is where the written data
// ends and zeros a crash left behind begin (the file grows ahead of its
// data, and after a crash its tail is unspecified). The scan then stops at
// once, instead of reading a zero-filled tail back as millions of empty
// blobs. Over a Reader opened with Options.Size, the scan ends at that size
// and a 0x00 byte is an empty blob, as in files written by Neon. Over a
// Reader opened with Options.Checksum, every blob's checksum is checked,
// and without Options.Size the first blob a crash tore ends the scan too
// (see Torn).
func NewScanner(r *Reader) *Scanner { return NewScannerAt(r, 0) }

// NewScannerAt returns a Scanner over r's blobs starting with the one at
// off, an offset WriteBlob returned (or Scanner.Offset, to resume a scan).
// An offset outside the file makes the first Scan fail with ErrOffset.
func NewScannerAt(r *Reader, off int64) *Scanner {
	s := &Scanner{
		r: r, w: r.c.NewWindow(scanWindow(r.scanSize)),
		start: off, pos: off, size: r.c.Size(), bounded: r.c.Bounded(), sum: r.sum, dec: &r.dec,
	}
	if off < 0 || off > r.c.Size() {
		s.err, s.ended = fmt.Errorf("%w: scanning from %d, size %d", ErrOffset, off, r.c.Size()), true
		return s
	}
	if err := r.c.Track(s, s.closeByReader); err != nil {
		s.err, s.ended = err, true
	}
	return s
}

// NewScannerReaderAt returns a Scanner over the blobs in ra from off up to
// size, such as an ephemeral.File's (whose ReadAt serves what is still in
// memory too) or a section of a larger file. It reads DefaultScanRead
// bytes at a time, one read after another; size is a logical size, so a
// 0x00 byte there is an empty blob. Close releases its buffers.
func NewScannerReaderAt(ra io.ReaderAt, off, size int64) *Scanner {
	s := &Scanner{
		w:     reader.NewWindowReaderAt(ra, size, "blobio", scanWindow(DefaultScanRead)),
		start: off, pos: off, size: size, bounded: true, dec: new(decoderPool),
	}
	if off < 0 || off > size {
		s.err, s.ended = fmt.Errorf("%w: scanning from %d, size %d", ErrOffset, off, size), true
	}
	return s
}

// bytes returns the n stream bytes at off, from the window, assembling
// them in a copy when they straddle its reads.
func (s *Scanner) bytes(off int64, n int) ([]byte, error) {
	b, err := s.chunk(off)
	if err != nil {
		return nil, err
	}
	if len(b) >= n {
		return b[:n], nil
	}
	s.scratch = append(s.scratch[:0], b...)
	for len(s.scratch) < n {
		if b, err = s.chunk(off + int64(len(s.scratch))); err != nil {
			return nil, err
		}
		s.scratch = append(s.scratch, b[:min(len(b), n-len(s.scratch))]...)
	}
	return s.scratch, nil
}

// chunk returns the window's bytes from off to the end of a read: from
// the read the scan is in while it holds off, so that the window is
// asked only when the scan moves on to the next read.
func (s *Scanner) chunk(off int64) ([]byte, error) {
	if d := off - s.curOff; d >= 0 && d < int64(len(s.cur)) {
		return s.cur[d:], nil
	}
	b, err := s.w.Next(off)
	s.cur, s.curOff = b, off
	return b, err
}

// Scan advances to the next blob, which Bytes then returns. It returns
// false at the end of the file or on an error, which Err reports.
func (s *Scanner) Scan() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return false
	}
	if s.pos >= s.size {
		s.finish(nil)
		return false
	}
	if !s.started {
		// The opening reads go to the queue in one batch; one it
		// refuses ends the scan at once.
		s.started = true
		if err := s.w.Start(s.start); err != nil {
			s.finish(err)
			return false
		}
	}
	ok, err := s.next()
	if err != nil {
		s.finish(blobError(s.pos, err))
		return false
	}
	if !ok {
		s.finish(nil)
	}
	return ok
}

// next parses the blob at s.pos. It returns false, and no error, at the
// 0x00 byte that ends the written data of an unbounded Reader.
func (s *Scanner) next() (bool, error) {
	first, err := s.bytes(s.pos, 1)
	if err != nil {
		return false, err
	}
	if first[0] == 0 && !s.bounded {
		return false, nil
	}
	hs := 1
	if first[0] > shortMax {
		hs = MaxHeaderSize
		if s.pos+int64(hs) > s.size {
			if s.tornTail() {
				return false, nil
			}
			return false, io.ErrUnexpectedEOF
		}
	}
	h, err := s.bytes(s.pos, hs)
	if err != nil {
		return false, err
	}
	hs, n, c, err := DecodeHeader(h)
	if err != nil {
		return false, err
	}
	if s.pos+int64(hs)+int64(n) > s.size {
		if s.tornTail() {
			return false, nil
		}
		return false, fmt.Errorf("%d bytes run past the end of the file at %d: %w", n, s.size, io.ErrUnexpectedEOF)
	}
	var p []byte
	if n > 0 {
		// An empty payload needs no bytes: asking for them at the end of
		// the file would read past it (issue 12, item 3).
		if p, err = s.bytes(s.pos+int64(hs), n); err != nil {
			return false, err
		}
	}
	if s.sum {
		if p, err = s.unseal(p, c, s.pos+int64(hs)+int64(n)); err != nil || p == nil {
			return false, err
		}
	}
	if c == Zstd {
		if s.decoded, err = s.dec.decode(p, c, s.decoded); err != nil {
			return false, err
		}
		p = s.decoded
	}
	if s.r != nil {
		s.r.c.Meter().Asked(direct.OpRead, hs+n) // as ReadBlob counts a blob
	}
	s.off, s.blob = s.pos, p
	s.pos += int64(hs) + int64(n)
	return true, nil
}

// Bytes returns the current blob. It is valid until the next Scan.
func (s *Scanner) Bytes() []byte { return s.blob }

// Offset returns the current blob's offset, as WriteBlob returned it.
func (s *Scanner) Offset() int64 { return s.off }

// Err returns the first error met, or nil at a clean end of the file.
// After Close it is ErrClosed unless the scan had ended before.
func (s *Scanner) Err() error { return s.err }

// Close stops the scan and releases the Scanner's buffers and queue, as
// reaching the end does; later Scans return false. Closing a Scanner that
// has ended, or closing it twice, does nothing and returns nil.
func (s *Scanner) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finish(ErrClosed)
	return nil
}

// closeByReader finishes s for its Reader's Close, after a Scan in
// progress.
func (s *Scanner) closeByReader() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finish(ErrClosed)
}

// finish records err, waits for the reads in flight and releases the
// scanner's window. s.mu is held.
func (s *Scanner) finish(err error) {
	if s.ended {
		return
	}
	s.ended = true
	if s.err == nil {
		s.err = err
	}
	s.blob, s.cur = nil, nil
	s.w.Close()
	if s.r == nil {
		s.dec.close()
		return
	}
	s.r.c.Untrack(s)
}
