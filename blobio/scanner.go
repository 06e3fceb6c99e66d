package blobio

import (
	"fmt"
	"io"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
)

// A Scanner walks every blob of a file in order, like bufio.Scanner walks
// lines. It reads whole aligned buffers and keeps the read of the next one
// in flight while the current one is parsed. A Scanner's resources are
// released when Scan returns false or when its Reader is closed.
type Scanner struct {
	r    *Reader
	q    direct.Queue
	done chan direct.Completion
	bufs [2]*aligned.Buffer

	cur      int   // index of the buffer being parsed
	curOff   int64 // stream offset of bufs[cur][0]
	curLen   int   // bytes valid in bufs[cur]
	ahead    bool  // a read into bufs[1-cur] is in flight
	aheadOff int64

	pos     int64 // offset of the next blob
	off     int64 // offset of the current blob
	blob    []byte
	scratch []byte // a blob straddling buffers, assembled
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

// NewScanner returns a Scanner over r's blobs, starting at offset 0.
func NewScanner(r *Reader) *Scanner {
	s := &Scanner{r: r, done: make(chan direct.Completion, 2)}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		s.err, s.ended = ErrClosed, true
		return s
	}
	r.scanners[s] = struct{}{}
	return s
}

// start allocates the buffers and the queue, and reads the first two
// windows.
func (s *Scanner) start() error {
	q, err := s.r.f.NewQueue(&direct.QueueOptions{Depth: 2})
	if err != nil {
		return err
	}
	s.q = q
	for i := range s.bufs {
		if s.bufs[i], err = aligned.New(s.r.bufSize, s.r.memAl); err != nil {
			return err
		}
	}
	s.cur = 1 // advance swaps to 0
	if err := s.readAhead(0); err != nil {
		return err
	}
	return s.advance()
}

// readAhead starts reading the window at off into the spare buffer.
func (s *Scanner) readAhead(off int64) error {
	if off >= s.r.size {
		return nil
	}
	spare := 1 - s.cur
	err := s.q.Submit(direct.Request{Op: direct.OpRead, Buf: s.bufs[spare].Bytes(), Off: off, Done: s.done})
	if err != nil {
		return err
	}
	s.ahead, s.aheadOff = true, off
	return nil
}

// advance makes the buffer read ahead current and reads the next one.
func (s *Scanner) advance() error {
	if !s.ahead {
		return fmt.Errorf("blobio: scanning at %d: file ends at %d: %w", s.curOff+int64(s.curLen), s.r.size, io.ErrUnexpectedEOF)
	}
	c := s.q.Await(s.done)
	s.ahead = false
	if c.Err != nil && c.Err != io.EOF {
		return c.Err
	}
	s.cur = 1 - s.cur
	s.curOff, s.curLen = s.aheadOff, c.N
	if c.N == 0 {
		return fmt.Errorf("blobio: scanning at %d: file ends early: %w", s.curOff, io.ErrUnexpectedEOF)
	}
	return s.readAhead(s.curOff + int64(c.N))
}

// bytes returns the n stream bytes at off, which is at or after the
// current buffer's start, advancing through buffers as needed.
func (s *Scanner) bytes(off int64, n int) ([]byte, error) {
	for off >= s.curOff+int64(s.curLen) {
		if err := s.advance(); err != nil {
			return nil, err
		}
	}
	i := int(off - s.curOff)
	if i+n <= s.curLen {
		return s.bufs[s.cur].Bytes()[i : i+n], nil
	}
	// Straddles buffers: assemble a copy.
	s.scratch = append(s.scratch[:0], s.bufs[s.cur].Bytes()[i:s.curLen]...)
	for len(s.scratch) < n {
		if err := s.advance(); err != nil {
			return nil, err
		}
		k := min(n-len(s.scratch), s.curLen)
		s.scratch = append(s.scratch, s.bufs[s.cur].Bytes()[:k]...)
	}
	return s.scratch, nil
}

// Scan advances to the next blob, which Bytes then returns. It returns
// false at the end of the file or on an error, which Err reports.
func (s *Scanner) Scan() bool {
	if s.ended {
		return false
	}
	if s.pos >= s.r.size {
		s.finish(nil)
		return false
	}
	if s.q == nil {
		if err := s.start(); err != nil {
			s.finish(err)
			return false
		}
	}
	if err := s.next(); err != nil {
		s.finish(fmt.Errorf("blobio: blob at %d: %w", s.pos, err))
		return false
	}
	return true
}

func (s *Scanner) next() error {
	first, err := s.bytes(s.pos, 1)
	if err != nil {
		return err
	}
	hs := 1
	if first[0] > shortMax {
		hs = MaxHeaderSize
		if s.pos+int64(hs) > s.r.size {
			return io.ErrUnexpectedEOF
		}
	}
	h, err := s.bytes(s.pos, hs)
	if err != nil {
		return err
	}
	hs, n, c, err := DecodeHeader(h)
	if err != nil {
		return err
	}
	if s.pos+int64(hs)+int64(n) > s.r.size {
		return fmt.Errorf("%d bytes run past the end of the file at %d: %w", n, s.r.size, io.ErrUnexpectedEOF)
	}
	p, err := s.bytes(s.pos+int64(hs), n)
	if err != nil {
		return err
	}
	if c == Zstd {
		s.r.mu.Lock()
		s.decoded, err = s.r.decode(p, c, s.decoded)
		s.r.mu.Unlock()
		if err != nil {
			return err
		}
		p = s.decoded
	}
	s.off, s.blob = s.pos, p
	s.pos += int64(hs) + int64(n)
	return nil
}

// Bytes returns the current blob. It is valid until the next Scan.
func (s *Scanner) Bytes() []byte { return s.blob }

// Offset returns the current blob's offset, as WriteBlob returned it.
func (s *Scanner) Offset() int64 { return s.off }

// Err returns the first error met, or nil at a clean end of the file.
func (s *Scanner) Err() error { return s.err }

// finish records err, waits for the read in flight and releases the
// scanner's buffers and queue.
func (s *Scanner) finish(err error) {
	if s.ended {
		return
	}
	s.ended = true
	if s.err == nil {
		s.err = err
	}
	s.blob = nil
	if s.q != nil {
		if s.ahead {
			s.q.Await(s.done)
		}
		s.q.Close()
	}
	for _, b := range s.bufs {
		if b != nil {
			b.Free()
		}
	}
	s.r.mu.Lock()
	delete(s.r.scanners, s)
	s.r.mu.Unlock()
}
