package blobio

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"syscall"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/appender"
	"github.com/dio-storage/dio/internal/reader"
)

// ErrOffset reports a blob offset outside the file.
var ErrOffset = errors.New("blobio: offset outside the file")

// How a Reader reads.
const (
	// ReadDepth is the depth of a Reader's queue, and the most reads one
	// ReadBlobs call keeps in flight: the reader core's (internal/reader).
	// fio's 4 KiB random reads on the virtio disk measured here still
	// gained from QD16 to QD64 (63,192 to 109,594 reads/s, issue 13), and
	// batches of 64 ran at 0.66-0.91x fio QD32 with 64 in flight against
	// 0.62-0.72x with 32.
	ReadDepth = reader.Depth

	// MergeSize is the longest read ReadBlobs merges neighbouring blobs
	// into, and the size of a Reader's large read buffers (plus one block,
	// so that a blob of this size fits wherever its header sits): Neon's
	// vectored reads merge up to 128 KiB (vectored_blob_io.rs).
	MergeSize = reader.LargeRead

	// maxMergeGap is the widest run of unwanted bytes ReadBlobs reads to
	// merge two blobs into one request. At depth, a 4 KiB read on the disk
	// measured here costs what about 13 KiB of transfer does (110k reads/s
	// at QD64 beside 1.4 GB/s sequential), so a gap up to that is cheaper
	// to read than to skip.
	maxMergeGap = 16 << 10

	// firstGuess is how far past a blob's offset the first read reaches
	// before the Reader has seen a blob: a 4 KiB page and its header.
	firstGuess = 4<<10 + MaxHeaderSize
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
	c        *reader.Reader // the reader core (internal/reader), which fileio's Reader is made of too
	scanSize int            // the Scanner's read size: BufferSize, or DefaultScanRead if unset
	sum      bool           // Options.Checksum: every blob's seal is checked
	dec      decoderPool
	guess    atomic.Int64 // how far past a blob's offset a first read reaches
}

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
// ErrInvalidOptions, and so does a file written with Options.Checksum
// opened without it, which Open tells by its first blob's seal (see
// Options.Checksum).
func Open(path string, o *Options) (*Reader, error) {
	if o != nil && (o.Size < 0 || o.BufferSize < 0 || o.BufferSize > appender.MaxBufferSize) {
		return nil, fmt.Errorf("%w: Size %d, BufferSize %d (at most %d)", ErrInvalidOptions, o.Size, o.BufferSize, appender.MaxBufferSize)
	}
	opts := o.withDefaults()
	if !opts.IO.Valid() {
		return nil, fmt.Errorf("%w: unknown I/O policy %v", ErrInvalidOptions, opts.IO)
	}
	c, err := reader.Open(path, reader.Options{Name: "blobio", IO: opts.IO, Faults: opts.Faults, Size: opts.Size, Slow: opts.Slow,
		Closed: ErrClosed, Invalid: ErrInvalidOptions, Offset: ErrOffset})
	if err != nil {
		return nil, err
	}
	scan := opts.BufferSize
	if o == nil || o.BufferSize <= 0 {
		scan = DefaultScanRead
	}
	r := &Reader{c: c, scanSize: aligned.Up(scan, int(c.Block())), sum: opts.Checksum}
	r.guess.Store(firstGuess)
	if sealed, _ := r.firstSeal(); !r.sum && sealed {
		r.Close()
		return nil, fmt.Errorf("%w: the first blob of %s carries a CRC32C seal: the file was written with Options.Checksum, and is read with it", ErrInvalidOptions, path)
	}
	return r, nil
}

// sealCheck is how far into a file Open looks for its first blob's seal.
const sealCheck = 64 << 10

// firstSeal reports whether the file's first blob ends in a valid seal
// (sealed: a file written with Options.Checksum; a blob written without
// one passes by the chance of 1 in 2^32 that its last 4 bytes match the
// CRC32C of the rest), and whether it could tell (known): the first blob
// must lie whole within the first sealCheck bytes, and be read.
func (r *Reader) firstSeal() (sealed, known bool) {
	buf := make([]byte, min(r.c.Size(), sealCheck))
	if len(buf) == 0 || r.c.Acquire() != nil {
		return false, false
	}
	n, err := r.c.ReadSpan(buf, 0) // not ReadAt: the Reader's own read, not a caller's (Stats)
	r.c.Release()
	if err != nil && n < len(buf) {
		return false, false
	}
	hs, stored, c, err := DecodeHeader(buf[:n])
	if err != nil || hs+stored > n {
		return false, false
	}
	if stored < crcSize {
		return false, true
	}
	_, err = unseal(buf[hs:hs+stored], c)
	return err == nil, true
}

// ReaderStats counts a Reader's reads since Open (direct.ReaderStats,
// as fileio's): Reads and Bytes are the blobs ReadBlob and ReadBlobs
// found (each blob's header and stored bytes), the blobs a Scanner
// returned, and ReadAt's calls and bytes; DeviceBytes what the device
// read, whole aligned blocks: a Scanner's read-ahead and Open's look at
// the first blob's seal (up to 64 KiB) included.
type ReaderStats = direct.ReaderStats

// Stats returns the Reader's counts. The process's, by path, are
// direct.Stats.
func (r *Reader) Stats() ReaderStats { return r.c.Stats().Reader() }

// Size returns the size the Reader reads up to: Options.Size, or the size
// of the file when it was opened.
func (r *Reader) Size() int64 { return r.c.Size() }

// Mode reports the I/O path the reader uses.
func (r *Reader) Mode() fallback.Mode { return r.c.File().Mode() }

// ReadBlob reads the blob at off, appending it to dst[:0]. The header and
// the blob come in one aligned read when the blob is no longer than those
// read lately, wherever the header sits in its block; else the rest follows
// in a second read. A blob that runs past the end of the file gives an
// error matching io.ErrUnexpectedEOF; bad header bits give ErrCorrupt. A
// 0x00 byte at off is an empty blob: asked for explicitly, it is read as
// such even without Options.Size. ReadBlob allocates nothing when dst has
// room for the blob.
func (r *Reader) ReadBlob(off int64, dst []byte) ([]byte, error) {
	rc := r.c
	if err := rc.Acquire(); err != nil {
		return dst[:0], err
	}
	defer rc.Release()
	if off < 0 || off >= rc.Size() {
		return dst[:0], fmt.Errorf("%w: offset %d, size %d", ErrOffset, off, rc.Size())
	}
	lo := aligned.Down(off, rc.Align())
	hi := r.readEnd(lo, off+r.guess.Load())
	pool := rc.PoolFor(hi - lo)
	b, err := pool.GetAny()
	if err != nil {
		return dst[:0], err
	}
	defer pool.Put(b)
	n, err := rc.Read(b.Done, b.Buf.Bytes()[:hi-lo], lo)
	var bad error // bad sectors past the blob's start: they may lie past its end too
	if reader.BadSectors(err) && lo+int64(n) > off {
		bad, err = err, nil
	}
	if err != nil {
		return dst[:0], blobError(off, err)
	}
	payload, c, big, err := r.blobIn(b, lo, r.valid(lo, n), off, nil)
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

// readEnd returns where a read from lo that should reach want ends:
// aligned, past the longest header, within a buffer and the logical size.
func (r *Reader) readEnd(lo, want int64) int64 {
	c := r.c
	hi := aligned.Up(max(want, lo+MaxHeaderSize), c.Align())
	return min(hi, lo+int64(c.Large().Size()), aligned.Up(c.Size(), c.Align()))
}

// valid returns how many of the n bytes read at lo lie within the logical
// size.
func (r *Reader) valid(lo int64, n int) int { return int(min(int64(n), r.c.Size()-lo)) }

// blobIn returns the stored bytes and the compression of the blob at off,
// from b, which holds valid bytes read at lo. What b lacks of the blob is
// read into b when it fits (the bytes b holds stay as they are, so other
// blobs in it can still be taken), else into a buffer of its own, big,
// which the caller frees.
//
// The blob is counted as a read asked for in tally, or, with a nil
// tally, in the Reader's meter at once.
func (r *Reader) blobIn(b *reader.Buf, lo int64, valid int, off int64, tally *asked) (payload []byte, c Compression, big *aligned.Buffer, err error) {
	have := b.Buf.Bytes()[:valid]
	if off >= lo+int64(valid) {
		return nil, None, nil, fmt.Errorf("file ends at %d: %w", lo+int64(valid), io.ErrUnexpectedEOF)
	}
	hs, n, c, err := DecodeHeader(have[off-lo:])
	if err != nil {
		return nil, None, nil, err
	}
	start, end := off+int64(hs), off+int64(hs)+int64(n)
	if end > r.c.Size() {
		return nil, None, nil, fmt.Errorf("%d bytes run past the end of the file at %d: %w", n, r.c.Size(), io.ErrUnexpectedEOF)
	}
	r.learn(end - off)
	if tally != nil { // the blob, header and stored bytes
		tally.calls, tally.bytes = tally.calls+1, tally.bytes+hs+n
	} else {
		r.c.Meter().Asked(direct.OpRead, hs+n)
	}
	if end <= lo+int64(valid) {
		return have[start-lo : end-lo], c, nil, nil
	}
	if to := aligned.Up(end, r.c.Align()); to-lo <= int64(len(b.Buf.Bytes())) {
		// The rest fits b: read it from the block where the first read
		// stopped, which rewrites that block's bytes with themselves.
		from := lo + aligned.Down(int64(valid), r.c.Block())
		m, err := r.c.Read(b.Done, b.Buf.Bytes()[from-lo:to-lo], from)
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
	if next := max(min(extent, int64(r.c.Large().Size())), g-g/16, MaxHeaderSize); next != g {
		r.guess.Store(next)
	}
}

// readLarge reads [start, end), larger than a read buffer, into a buffer of
// its own, which the caller frees.
func (r *Reader) readLarge(done chan direct.Completion, start, end int64) (*aligned.Buffer, []byte, error) {
	c := r.c
	lo := aligned.Down(start, c.Align())
	hi := aligned.Up(end, c.Align())
	b, err := aligned.New(int(aligned.Up(hi-lo, c.Block())), c.MemAlign())
	if err != nil {
		return nil, nil, err
	}
	n, err := c.Read(done, b.Bytes()[:hi-lo], lo)
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
	err := r.c.Close()
	if err != ErrClosed { // not closed before: nothing decodes now
		r.dec.close()
	}
	return err
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
