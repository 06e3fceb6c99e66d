package blobio

import (
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/internal/reader"
)

// A Scanner walks every blob of a file in order, like bufio.Scanner walks
// lines. It reads whole aligned buffers and keeps the read of the next one
// in flight while the current one is parsed. A Scanner's resources are
// released when Scan returns false, by Close, or when its Reader is
// closed. A Scanner is for one goroutine; its Reader may be closed from
// another.
type Scanner struct {
	r     *Reader     // the Reader scanned, or nil for NewScannerReaderAt's
	ra    io.ReaderAt // NewScannerReaderAt's source, read synchronously
	mu    sync.Mutex  // held by Scan, and by the Reader's Close finishing it
	q     direct.Queue
	bufs  [2]*aligned.Buffer
	done  [2]chan direct.Completion // bufs[i]'s read completes on done[i]
	batch [2]direct.Request         // begin's two reads, submitted together

	start    int64 // offset of the first blob
	size     int64 // where the blobs end
	bounded  bool  // size is a logical size: a 0x00 byte is an empty blob
	sum      bool  // the Reader checks seals (Options.Checksum)
	torn     bool  // the scan ended at a torn last blob (see Torn)
	readSize int   // bytes per read
	memAl    int   // the buffers' memory alignment
	offAl    int64 // the reads' offset alignment
	dec      *decoderPool
	raDone   direct.Completion // NewScannerReaderAt's read ahead, already done

	started bool     // begin ran: the buffers exist and the first reads went out
	cur     int      // index of the buffer being parsed
	curOff  int64    // stream offset of bufs[cur][0]
	curLen  int      // bytes valid in bufs[cur]
	reading [2]bool  // a read into bufs[i] is in flight (or, for ra, done and not yet taken)
	readOff [2]int64 // where it reads

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
// and without Options.Size a torn last blob ends the scan too (see Torn).
func NewScanner(r *Reader) *Scanner { return NewScannerAt(r, 0) }

// NewScannerAt returns a Scanner over r's blobs starting with the one at
// off, an offset WriteBlob returned (or Scanner.Offset, to resume a scan).
// An offset outside the file makes the first Scan fail with ErrOffset.
func NewScannerAt(r *Reader, off int64) *Scanner {
	s := &Scanner{
		r: r, done: [2]chan direct.Completion{make(chan direct.Completion, 1), make(chan direct.Completion, 1)},
		start: off, pos: off, size: r.c.Size(), bounded: r.c.Bounded(), sum: r.sum,
		readSize: r.scanSize, memAl: r.c.MemAlign(), offAl: r.c.Align(), dec: &r.dec,
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
		ra: ra, start: off, pos: off, size: size, bounded: true,
		readSize: DefaultScanRead, memAl: os.Getpagesize(), offAl: 1, dec: new(decoderPool),
	}
	if off < 0 || off > size {
		s.err, s.ended = fmt.Errorf("%w: scanning from %d, size %d", ErrOffset, off, size), true
	}
	return s
}

// alloc allocates the buffers and the queue, once.
func (s *Scanner) alloc() error {
	if s.bufs[1] != nil {
		return nil
	}
	if s.ra == nil && s.q == nil {
		q, err := s.r.c.File().NewQueue(&direct.QueueOptions{Depth: 2})
		if err != nil {
			return err
		}
		s.q = q
	}
	for i := range s.bufs {
		if s.bufs[i] != nil {
			continue
		}
		var err error
		if s.bufs[i], err = aligned.New(s.readSize, s.memAl); err != nil {
			return err
		}
	}
	return nil
}

// begin allocates the buffers and the queue, and reads the first two
// windows: on a queue both reads go in together, one io_uring_enter for
// the two (direct.SubmitBatch), and the second is read while the first
// is parsed.
func (s *Scanner) begin() error {
	s.started = true
	if err := s.alloc(); err != nil {
		return err
	}
	s.cur = 1 // advance makes bufs[0] current
	first := aligned.Down(s.start, s.offAl)
	if second := first + int64(s.readSize); s.q != nil && first < s.size && second < s.size {
		if err := s.readBoth(first, second); err != nil {
			return err
		}
	} else if err := s.readAhead(first); err != nil {
		return err
	}
	return s.advance()
}

// readBoth starts reading the windows at first and second into bufs[0]
// and bufs[1] with one batch. When the queue refuses the second read the
// first stays in flight (finish waits for it) and the error is returned.
func (s *Scanner) readBoth(first, second int64) error {
	rs := &s.batch // a field: a local array would escape, one allocation per scan
	rs[0] = direct.Request{Op: direct.OpRead, Buf: s.bufs[0].Bytes(), Off: first, Done: s.done[0]}
	rs[1] = direct.Request{Op: direct.OpRead, Buf: s.bufs[1].Bytes(), Off: second, Done: s.done[1]}
	n, err := direct.SubmitBatch(s.q, rs[:])
	for i := range n {
		s.reading[i], s.readOff[i] = true, rs[i].Off
	}
	*rs = [2]direct.Request{}
	return err
}

// readAhead starts reading the window at off into the spare buffer.
func (s *Scanner) readAhead(off int64) error {
	if off >= s.size {
		return nil
	}
	i := 1 - s.cur
	spare := s.bufs[i].Bytes()
	if s.ra != nil {
		// An io.ReaderAt has no queue: read now, deliver at advance.
		want := spare[:min(int64(len(spare)), s.size-off)]
		n, err := s.ra.ReadAt(want, off)
		if n == len(want) && err == io.EOF {
			err = nil
		}
		s.raDone = direct.Completion{Op: direct.OpRead, N: n, Err: err}
		s.reading[i], s.readOff[i] = true, off
		return nil
	}
	err := s.q.Submit(direct.Request{Op: direct.OpRead, Buf: spare, Off: off, Done: s.done[i]})
	if err != nil {
		return err
	}
	s.reading[i], s.readOff[i] = true, off
	return nil
}

// advance makes the buffer read ahead current and reads the next one,
// unless begin's batch is reading it already.
func (s *Scanner) advance() error {
	i := 1 - s.cur
	if !s.reading[i] {
		return fmt.Errorf("blobio: scanning at %d: file ends at %d: %w", s.curOff+int64(s.curLen), s.size, io.ErrUnexpectedEOF)
	}
	c := s.await(i)
	if s.ra == nil && reader.UnsplitEIO(c.Err) {
		// Read the window again sector by sector, as ReadBlob does: an
		// EIO that passes costs nothing. Before a latent sector error
		// the window keeps the bytes read and the scan parses their
		// blobs; the read after them starts at the bad sectors and
		// fails, ending the scan at the blob that reaches into them
		// with an error naming them (a *direct.SectorError).
		n, err := s.r.c.File().ReadAt(s.bufs[i].Bytes(), s.readOff[i])
		if n > 0 && err != io.EOF {
			err = nil
		}
		c.N, c.Err = n, err
	}
	if c.Err != nil && c.Err != io.EOF {
		return c.Err
	}
	s.cur = i
	s.curOff, s.curLen = s.readOff[i], c.N
	if c.N == 0 {
		return fmt.Errorf("blobio: scanning at %d: file ends early: %w", s.curOff, io.ErrUnexpectedEOF)
	}
	next := s.curOff + int64(c.N)
	if j := 1 - i; s.reading[j] {
		if s.readOff[j] == next {
			return nil // begin's second read
		}
		// The first window came back short (the file ended before
		// size): begin's second read is not where the stream goes on.
		s.await(j)
	}
	return s.readAhead(next)
}

// await waits for the read into bufs[i] and returns its completion.
func (s *Scanner) await(i int) direct.Completion {
	c := s.raDone
	if s.ra == nil {
		c = s.q.Await(s.done[i])
	}
	s.reading[i] = false
	return c
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
		if err := s.begin(); err != nil {
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

// finish records err, waits for the read in flight and releases the
// scanner's buffers and queue. s.mu is held.
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
		for i, busy := range s.reading {
			if busy {
				s.await(i)
			}
		}
		s.q.Close()
	}
	for i, b := range s.bufs {
		if b != nil {
			b.Free()
			s.bufs[i] = nil
		}
	}
	if s.r == nil {
		s.dec.close()
		return
	}
	s.r.c.Untrack(s)
}
