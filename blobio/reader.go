package blobio

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/fileio"
	"github.com/dio-storage/dio/internal/readbuf"
	"github.com/dio-storage/dio/internal/unwrap"
)

// ErrOffset reports a blob offset outside the file.
var ErrOffset = errors.New("blobio: offset outside the file")

// How a Reader reads.
const (
	// ReadDepth is the depth of a Reader's queue, and the most reads one
	// ReadBlobs call keeps in flight. fio's 4 KiB random reads on the
	// virtio disk measured here still gained from QD16 to QD64 (63,192 to
	// 109,594 reads/s, issue 13), and batches of 64 ran at 0.66-0.91x
	// fio QD32 with 64 in flight against 0.62-0.72x with 32.
	ReadDepth = 64

	// MergeSize is the longest read ReadBlobs merges neighbouring blobs
	// into, and the size of a Reader's large read buffers (plus one block,
	// so that a blob of this size fits wherever its header sits): Neon's
	// vectored reads merge up to 128 KiB (vectored_blob_io.rs).
	MergeSize = 128 << 10

	// smallRead is the size of a Reader's small read buffers, which serve
	// every read that fits them: a 4 KiB page's blob wherever it sits, and
	// a blob up to 12 KiB.
	smallRead = 16 << 10

	// The most buffers of each size a Reader has: twice ReadDepth small
	// ones and half of it large, so that one ReadBlobs at full depth (it
	// takes at most half of each) leaves ReadBlob callers, fn's among
	// them, buffers of their own.
	smallBuffers = 2 * ReadDepth
	largeBuffers = ReadDepth / 2

	// maxMergeGap is the widest run of unwanted bytes ReadBlobs reads to
	// merge two blobs into one request. At depth, a 4 KiB read on the disk
	// measured here costs what about 13 KiB of transfer does (110k reads/s
	// at QD64 beside 1.4 GB/s sequential), so a gap up to that is cheaper
	// to read than to skip.
	maxMergeGap = 16 << 10

	// firstGuess is how far past a blob's offset the first read reaches
	// before the Reader has seen a blob: a 4 KiB page and its header.
	firstGuess = 4<<10 + MaxHeaderSize

	// preadReads is how many ReadBlob reads in progress run as plain
	// preads, each in its caller's thread; more join the queue. A lone
	// caller keeps the pread, which saves the queue's round trip.
	// Measured on the process's shared rings once submissions stopped
	// holding the ring's mutex across io_uring_enter (ext4 on virtio, 2
	// vCPUs shared with other load, reads of 4,000-byte blobs, 16 readers
	// against an in-process ring keeping 16 reads in flight as fio does,
	// sandwiched in 250 ms slices, medians of 14-16 rounds, 2026-12-02):
	// 1 by pread and the rest queued ran 0.73x and 0.48x (noisy), 4 by
	// pread 0.71x and 0.70x, all queued 0.72x and 0.73x, where 16 by
	// pread (the value before) ran 0.41-0.45x: 16 threads blocked in
	// pread cost more than one ring. Alone, pread and the queue ran
	// within 5% of each other.
	preadReads = 1

	closedBit = 1 << 62 // in Reader.state, beside the count of calls in progress
)

// A Reader reads blobs from a file by offset. It is safe for concurrent
// use, and holds no lock across a device read: each read takes an aligned
// buffer from a bounded pool, and runs as a plain pread in its caller's
// thread while no other is in progress (that saves a lone caller the
// queue's round trip) or, on an io_uring file, while others are, in the
// Reader's queue, where they are in flight together without a thread
// each. ReadBlobs keeps up to ReadDepth reads in flight, through the
// queue on io_uring and on goroutines of its own otherwise. zstd blobs are
// decoded outside any lock, by a pool of GOMAXPROCS decoders.
//
// Memory: a read that fits 16 KiB takes one of at most 128 small buffers
// (2 MiB), a larger one one of at most 32 buffers of MergeSize plus a
// block (4.1 MiB with 4 KiB blocks); a blob longer than that gets a buffer
// of its own for the read. So a Reader keeps at most 6.1 MiB of read
// buffers, allocated as reads need them and freed by Close; beyond them,
// a ReadBlob or ReadAt that finds every buffer in use gets one for itself,
// freed when it returns, rather than wait. Its read memory is reads in
// flight x read size.
//
// A Reader opened with Options.Size reads the file as if it were that long;
// otherwise it reads the file's size, but a Scanner stops at the first 0x00
// byte where a header is due (see NewScanner).
type Reader struct {
	fr *fileio.Reader // opens and closes the file, and serves ReadAt
	f  fallback.File  // fr's, which ReadBlob, ReadBlobs and Scanners read with queues of their own

	size     int64 // the logical size: Options.Size, or the file's size
	bounded  bool  // Options.Size was given
	align    int64 // offset alignment
	block    int64 // a multiple of both alignments
	memAl    int
	scanSize int // the Scanner's read size: BufferSize, or DefaultScanRead if unset
	uring    bool
	sum      bool // Options.Checksum: every blob's seal is checked

	small *readbuf.Pool // smallRead bytes
	large *readbuf.Pool // MergeSize plus a block
	dec   decoderPool
	guess atomic.Int64 // how far past a blob's offset a first read reaches
	busy  atomic.Int32 // device reads in progress

	state     atomic.Int64 // calls in progress, and closedBit
	drained   chan struct{}
	drainOnce sync.Once

	qmu sync.Mutex
	q   atomic.Pointer[queueRef]

	mu       sync.Mutex
	scanners map[*Scanner]struct{} // nil once closed
}

// queueRef holds the Reader's queue, or nil when the file could not give
// one (reads then use pread alone).
type queueRef struct{ q direct.Queue }

// Open opens the blob file at path for reading.
//
// With o.Size > 0 the Reader reads the file as if it were o.Size bytes
// long, the logical size a service recorded from Writer.Synced: Size
// reports it, offsets at or past it fail with ErrOffset, blobs running past
// it with io.ErrUnexpectedEOF, and a 0x00 byte there is an empty blob (as
// in files written by Neon). A Size beyond the file's end means bytes the
// service counted on are gone: Open fails with an error matching both
// ErrInvalidOptions and io.ErrUnexpectedEOF. A negative Size or BufferSize,
// or a BufferSize (a Scanner's read) over fileio.MaxBufferSize, fails with
// ErrInvalidOptions.
func Open(path string, o *Options) (*Reader, error) {
	if o != nil && (o.Size < 0 || o.BufferSize < 0 || o.BufferSize > fileio.MaxBufferSize) {
		return nil, fmt.Errorf("%w: Size %d, BufferSize %d (at most %d)", ErrInvalidOptions, o.Size, o.BufferSize, fileio.MaxBufferSize)
	}
	opts := o.withDefaults()
	fr, err := fileio.Open(path, &fileio.Options{IO: opts.IO, Size: opts.Size, Faults: opts.Faults})
	if err != nil {
		return nil, invalidAsOurs(err)
	}
	f := unwrap.File(fr)
	size := fr.Size()
	a := f.Alignment()
	block := max(a.Block(), direct.MinAlignment)
	scan := opts.BufferSize
	if o == nil || o.BufferSize <= 0 {
		scan = DefaultScanRead
	}
	memAl := max(a.Memory, direct.MinAlignment)
	r := &Reader{
		fr:       fr,
		f:        f,
		size:     size,
		bounded:  opts.Size > 0,
		align:    int64(a.Offset),
		block:    int64(block),
		memAl:    memAl,
		scanSize: aligned.Up(scan, block),
		uring:    f.Mode().Engine == direct.EngineURing,
		sum:      opts.Checksum,
		small:    readbuf.New(smallBuffers, aligned.Up(smallRead, block), memAl),
		large:    readbuf.New(largeBuffers, aligned.Up(MergeSize, block)+block, memAl),
		drained:  make(chan struct{}),
		scanners: map[*Scanner]struct{}{},
	}
	r.guess.Store(firstGuess)
	return r, nil
}

// Size returns the size the Reader reads up to: Options.Size, or the size
// of the file when it was opened.
func (r *Reader) Size() int64 { return r.size }

// Mode reports the I/O path the reader uses.
func (r *Reader) Mode() fallback.Mode { return r.f.Mode() }

// acquire counts a call in progress, or fails once the Reader is closed.
func (r *Reader) acquire() error {
	if r.state.Add(1)&closedBit != 0 {
		r.release()
		return ErrClosed
	}
	return nil
}

// release ends a call; the last one after Close lets Close go on.
func (r *Reader) release() {
	if r.state.Add(-1) == closedBit {
		r.drainOnce.Do(func() { close(r.drained) })
	}
}

// ReadBlob reads the blob at off, appending it to dst[:0]. The header and
// the blob come in one aligned read when the blob is no longer than those
// read lately, wherever the header sits in its block; else the rest follows
// in a second read. A blob that runs past the end of the file gives an
// error matching io.ErrUnexpectedEOF; bad header bits give ErrCorrupt. A
// 0x00 byte at off is an empty blob: asked for explicitly, it is read as
// such even without Options.Size. ReadBlob allocates nothing when dst has
// room for the blob.
func (r *Reader) ReadBlob(off int64, dst []byte) ([]byte, error) {
	if err := r.acquire(); err != nil {
		return dst[:0], err
	}
	defer r.release()
	if off < 0 || off >= r.size {
		return dst[:0], fmt.Errorf("%w: offset %d, size %d", ErrOffset, off, r.size)
	}
	lo := aligned.Down(off, r.align)
	hi := r.readEnd(lo, off+r.guess.Load())
	pool := r.pool(hi - lo)
	b, err := pool.GetAny()
	if err != nil {
		return dst[:0], err
	}
	defer pool.Put(b)
	n, err := r.read(b.Done, b.Buf.Bytes()[:hi-lo], lo)
	var bad error // bad sectors past the blob's start: they may lie past its end too
	if badSectors(err) && lo+int64(n) > off {
		bad, err = err, nil
	}
	if err != nil {
		return dst[:0], blobError(off, err)
	}
	payload, c, big, err := r.blobIn(b, lo, r.valid(lo, n), off)
	if err != nil && bad != nil && !errors.Is(err, syscall.EIO) {
		err = bad // the blob's header reached into the bad sectors
	}
	if err == nil {
		payload, err = r.checked(payload, c)
	}
	if err == nil {
		dst, err = r.dec.decode(payload, c, dst)
	}
	if big != nil {
		big.Free()
	}
	if err != nil {
		return dst[:0], blobError(off, err)
	}
	return dst, nil
}

// pool returns the pool whose buffers fit a read of n bytes.
func (r *Reader) pool(n int64) *readbuf.Pool {
	if n <= int64(r.small.Size()) {
		return r.small
	}
	return r.large
}

// readEnd returns where a read from lo that should reach want ends:
// aligned, past the longest header, within a buffer and the logical size.
func (r *Reader) readEnd(lo, want int64) int64 {
	hi := aligned.Up(max(want, lo+MaxHeaderSize), r.align)
	hi = min(hi, lo+int64(r.large.Size()), aligned.Up(r.size, r.align))
	return hi
}

// valid returns how many of the n bytes read at lo lie within the logical
// size.
func (r *Reader) valid(lo int64, n int) int { return int(min(int64(n), r.size-lo)) }

// blobIn returns the stored bytes and the compression of the blob at off,
// from b, which holds valid bytes read at lo. What b lacks of the blob is
// read into b when it fits (the bytes b holds stay as they are, so other
// blobs in it can still be taken), else into a buffer of its own, big,
// which the caller frees.
func (r *Reader) blobIn(b *readbuf.Buf, lo int64, valid int, off int64) (payload []byte, c Compression, big *aligned.Buffer, err error) {
	have := b.Buf.Bytes()[:valid]
	if off >= lo+int64(valid) {
		return nil, None, nil, fmt.Errorf("file ends at %d: %w", lo+int64(valid), io.ErrUnexpectedEOF)
	}
	hs, n, c, err := DecodeHeader(have[off-lo:])
	if err != nil {
		return nil, None, nil, err
	}
	start, end := off+int64(hs), off+int64(hs)+int64(n)
	if end > r.size {
		return nil, None, nil, fmt.Errorf("%d bytes run past the end of the file at %d: %w", n, r.size, io.ErrUnexpectedEOF)
	}
	r.learn(end - off)
	if end <= lo+int64(valid) {
		return have[start-lo : end-lo], c, nil, nil
	}
	if to := aligned.Up(end, r.align); to-lo <= int64(len(b.Buf.Bytes())) {
		// The rest fits b: read it from the block where the first read
		// stopped, which rewrites that block's bytes with themselves.
		from := lo + aligned.Down(int64(valid), r.block)
		m, err := r.read(b.Done, b.Buf.Bytes()[from-lo:to-lo], from)
		if err != nil {
			return nil, None, nil, err
		}
		if from+int64(m) < end {
			return nil, None, nil, fmt.Errorf("reading [%d, %d): file ends at %d: %w", start, end, from+int64(m), io.ErrUnexpectedEOF)
		}
		return b.Buf.Bytes()[start-lo : end-lo], c, nil, nil
	}
	big, payload, err = r.readLarge(b.Done, start, end)
	return payload, c, big, err
}

// learn adjusts how far first reads reach: to the longest blob extent seen
// lately (at most a buffer), decaying by 1/16 a read, so that blobs of one
// size come in one read each and a rare large one costs little.
func (r *Reader) learn(extent int64) {
	g := r.guess.Load()
	if next := max(min(extent, int64(r.large.Size())), g-g/16, MaxHeaderSize); next != g {
		r.guess.Store(next)
	}
}

// read reads into p at off. With more than preadReads reads in progress
// on an io_uring file it goes through the queue, so that they are all in
// the ring at once; else, and always on the pwrite engine (whose queue
// would only hand the same pread to a worker), it is a plain pread in the
// caller's thread. done receives the queued completion. A read cut short
// by the end of the file returns the bytes it got and no error.
func (r *Reader) read(done chan direct.Completion, p []byte, off int64) (int, error) {
	few := r.busy.Add(1) <= preadReads
	defer r.busy.Add(-1)
	if r.uring && !few {
		if q := r.queue(); q != nil {
			if err := q.Submit(direct.Request{Op: direct.OpRead, Buf: p, Off: off, Done: done}); err != nil {
				return 0, err
			}
			c := q.Await(done)
			if readbuf.UnsplitEIO(c.Err) {
				// A latent sector error: ReadAt reads the range again
				// sector by sector, keeping what can be read.
				return readbuf.EndOK(r.f.ReadAt(p, off))
			}
			return readbuf.EndOK(c.N, c.Err)
		}
	}
	return readbuf.EndOK(r.f.ReadAt(p, off))
}

// badSectors reports whether err names sectors that could not be read
// (direct.SectorError), the bytes before them having been read.
func badSectors(err error) bool {
	if err == nil { // first: errors.As's target escapes, and ReadBlob allocates nothing
		return false
	}
	var se *direct.SectorError
	return errors.As(err, &se)
}

// queue returns the Reader's queue, set up on first use, or nil if the
// file cannot give one.
func (r *Reader) queue() direct.Queue {
	if ref := r.q.Load(); ref != nil {
		return ref.q
	}
	r.qmu.Lock()
	defer r.qmu.Unlock()
	if ref := r.q.Load(); ref != nil {
		return ref.q
	}
	q, err := r.f.NewQueue(&direct.QueueOptions{Depth: ReadDepth})
	if err != nil {
		q = nil
	}
	r.q.Store(&queueRef{q})
	return q
}

// readLarge reads [start, end), larger than a read buffer, into a buffer of
// its own, which the caller frees.
func (r *Reader) readLarge(done chan direct.Completion, start, end int64) (*aligned.Buffer, []byte, error) {
	lo := aligned.Down(start, r.align)
	hi := aligned.Up(end, r.align)
	b, err := aligned.New(int(aligned.Up(hi-lo, r.block)), r.memAl)
	if err != nil {
		return nil, nil, err
	}
	n, err := r.read(done, b.Bytes()[:hi-lo], lo)
	if err != nil {
		b.Free()
		return nil, nil, err
	}
	if int64(n) < end-lo {
		b.Free()
		return nil, nil, fmt.Errorf("reading [%d, %d): file ends at %d: %w", start, end, lo+int64(n), io.ErrUnexpectedEOF)
	}
	return b, b.Bytes()[start-lo : end-lo], nil
}

// Close waits for the reads in progress, releases the reader, its
// scanners and its file, and makes later calls fail with ErrClosed.
func (r *Reader) Close() error {
	old := r.state.Or(closedBit)
	if old&closedBit != 0 {
		return ErrClosed
	}
	if old != 0 {
		<-r.drained
	}
	r.mu.Lock()
	scanners := r.scanners
	r.scanners = nil
	r.mu.Unlock()
	for s := range scanners {
		s.closeByReader()
	}
	if ref := r.q.Load(); ref != nil && ref.q != nil {
		ref.q.Close()
	}
	r.small.Close()
	r.large.Close()
	r.dec.close()
	return r.fr.Close()
}

// blobError names the blob at off in err: a corruption becomes a
// *CorruptError at off (its Off relative to the blob's header, as
// DecodeHeader and the zstd checks report it), any other error is
// prefixed with the offset.
func blobError(off int64, err error) error {
	var ce *CorruptError
	if errors.As(err, &ce) {
		return corruptAt(off, err)
	}
	return fmt.Errorf("blobio: blob at %d: %w", off, err)
}

// invalidAsOurs rewords an error of fileio's matching
// fileio.ErrInvalidOptions (a size past the file's end) as blobio's own,
// still matching what else it wrapped (io.ErrUnexpectedEOF); any other
// error is returned as it is.
func invalidAsOurs(err error) error {
	if !errors.Is(err, fileio.ErrInvalidOptions) {
		return err
	}
	return &invalidError{err}
}

// invalidError is a fileio error matching ErrInvalidOptions, in blobio's
// words.
type invalidError struct{ err error }

func (e *invalidError) Error() string {
	return "blobio: invalid options: " + strings.TrimPrefix(e.err.Error(), "fileio: invalid options: ")
}

func (e *invalidError) Is(target error) bool { return target == ErrInvalidOptions }
func (e *invalidError) Unwrap() error        { return e.err }
