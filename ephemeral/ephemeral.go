package ephemeral

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"sync"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/appender"
)

var (
	// ErrClosed reports use of a closed File. It matches fs.ErrClosed too,
	// as os.File's errors do.
	ErrClosed = fmt.Errorf("ephemeral: %w", fs.ErrClosed)
	// ErrInvalidOptions reports Options that Create refuses, before any
	// file is created.
	ErrInvalidOptions = errors.New("ephemeral: invalid options")
)

// Options configure Create. A nil *Options means defaults.
type Options struct {
	BufferSize int             // bytes per buffer; default 64 KiB, rounded up to the file's alignment
	Buffers    int             // buffers per file; default: two merged 512 KiB writes with O_DIRECT (16 of 64 KiB), 4 through the page cache or a Pool
	IO         fallback.Policy // default Auto

	// Pool, when set, supplies the write buffers, so that many files
	// share one memory budget: Create waits for a buffer rather than
	// exceed it. Its buffer size overrides BufferSize.
	Pool *aligned.Pool

	// Faults injects I/O errors into the file's engine, for tests (see
	// package faults).
	Faults direct.Injector
}

// A File is a temporary append-only file. One goroutine may append while
// others read; all methods are safe for concurrent use.
type File struct {
	mu     sync.Mutex // not RWMutex: WriteBlob takes it per blob, and an RWMutex costs twice the atomics
	ap     *appender.Appender
	f      fallback.File
	hdr    [blobio.MaxHeaderSize]byte
	closed bool
	rc     readCache
}

// readCache holds the file's last disk reads. Its buffers are the file's
// own, outside any shared pool (a reader waiting on a pool whose budget
// the writers hold would never wake), allocated at the first disk read.
//
// bufs[cur] holds the file's bytes [off, off+n), all of them final on disk
// when read. A read that starts where the cache ends doubles the next
// read's size, up to a whole buffer (readAheadSize), as the
// kernel's readahead does; any other read resets it to one write buffer,
// so random reads are not inflated. Once a sequential reader reads whole
// buffers, the next one is read into the other buffer in the background
// (ahead), so the device works while the caller parses.
type readCache struct {
	bufs [2]*aligned.Buffer
	cur  int
	off  int64
	n    int
	size int // bytes of the next read

	ahead      bool // a read of [aheadOff, aheadFinal) is in flight into bufs[1-cur]
	aheadOff   int64
	aheadFinal int64
	aheadDone  chan direct.Completion
}

// readAheadSize is the size of each read buffer, rounded up to whole write
// buffers: sequential reads of 512 KiB instead of 64 KiB run several times
// faster on the disks measured here, which charge for every request.
const readAheadSize = 512 << 10

// Create creates a temporary file in dir.
func Create(dir string, o *Options) (*File, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	f, err := createTemp(dir, opts.IO)
	if err != nil {
		return nil, err
	}
	ap, err := appender.New(f, appender.Options{BufferSize: opts.BufferSize, Buffers: opts.Buffers, Pool: opts.Pool, Faults: opts.Faults})
	if err != nil {
		f.Close()
		return nil, err
	}
	return &File{ap: ap, f: f}, nil
}

// Mode reports the I/O path the file uses.
func (f *File) Mode() fallback.Mode { return f.f.Mode() }

// Size returns the number of bytes appended.
func (f *File) Size() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ap.Size()
}

// Write appends p; its offset is Size before the call. After an I/O error
// every Write returns that error.
func (f *File) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, ErrClosed
	}
	return f.ap.Write(p)
}

// WriteBlob appends p as one blob in blobio's format and returns its
// offset.
func (f *File) WriteBlob(p []byte) (off int64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, ErrClosed
	}
	if err := f.ap.Err(); err != nil {
		return 0, err
	}
	hdr, err := blobio.AppendHeader(f.hdr[:0], len(p), blobio.None)
	if err != nil {
		return 0, err
	}
	return f.ap.WriteRecord(hdr, p)
}

// ReadAt reads len(p) bytes at off, from memory where the bytes are still
// buffered and from the disk otherwise. At the end of the file it returns
// the bytes there are and io.EOF.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, ErrClosed
	}
	return f.readAt(p, off)
}

// readAt is ReadAt with f.mu held.
func (f *File) readAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("ephemeral: read at negative offset %d", off)
	}
	end := min(off+int64(len(p)), f.ap.Size())
	pos := off
	for pos < end {
		if k := f.rc.copy(p[pos-off:end-off], pos); k > 0 {
			pos += int64(k)
			continue
		}
		mem, next := f.ap.Cached(pos)
		if mem != nil {
			pos += int64(copy(p[pos-off:end-off], mem))
			continue
		}
		if err := f.readDisk(pos, next); err != nil {
			return int(pos - off), err
		}
	}
	if n := int(pos - off); n < len(p) {
		return n, io.EOF
	}
	return len(p), nil
}

// copy copies the cached bytes at pos into p and returns how many.
func (rc *readCache) copy(p []byte, pos int64) int {
	if pos < rc.off || pos >= rc.off+int64(rc.n) {
		return 0
	}
	return copy(p, rc.bufs[rc.cur].Bytes()[pos-rc.off:rc.n])
}

// readDisk fills the read cache with the file's bytes at pos, which are on
// disk for good up to final: from the read-ahead when it holds them, else
// with an aligned read.
func (f *File) readDisk(pos, final int64) error {
	rc := &f.rc
	if rc.bufs[0] == nil {
		if err := f.allocReadCache(); err != nil {
			return err
		}
	}
	sequential := rc.n > 0 && pos == rc.off+int64(rc.n)
	if rc.ahead {
		// A failed read-ahead is dropped, not reported: the read below
		// tries again and reports what persists.
		c := f.awaitAhead()
		if sequential && pos == rc.aheadOff && (c.Err == nil || c.Err == io.EOF) {
			rc.cur = 1 - rc.cur
			rc.off, rc.n = rc.aheadOff, int(min(int64(c.N), rc.aheadFinal-rc.aheadOff))
			if rc.n > 0 {
				f.startAhead(final)
				return nil
			}
		}
	}
	if sequential {
		rc.size = min(2*rc.size, rc.bufs[0].Size())
	} else {
		rc.size = f.ap.BufferSize()
	}
	lo := aligned.Down(pos, int64(f.f.Alignment().Offset))
	rc.n = 0
	n, err := f.f.ReadAt(rc.bufs[rc.cur].Bytes()[:rc.size], lo)
	if err != nil && err != io.EOF {
		return err
	}
	rc.off, rc.n = lo, int(min(int64(n), final-lo))
	if rc.n <= int(pos-lo) {
		rc.n = 0
		return fmt.Errorf("ephemeral: reading at %d: file ends at %d: %w", pos, lo+int64(n), io.ErrUnexpectedEOF)
	}
	if sequential && rc.size == rc.bufs[0].Size() {
		f.startAhead(final)
	}
	return nil
}

func (f *File) allocReadCache() error {
	size, align := aligned.Up(readAheadSize, f.ap.BufferSize()), max(f.f.Alignment().Memory, 512)
	for i := range f.rc.bufs {
		b, err := aligned.New(size, align)
		if err != nil {
			f.freeReadCache()
			return err
		}
		f.rc.bufs[i] = b
	}
	f.rc.size = f.ap.BufferSize()
	f.rc.aheadDone = make(chan direct.Completion, 1)
	return nil
}

// startAhead reads the bytes after the cache into the other buffer in the
// background, if they are final on disk.
func (f *File) startAhead(final int64) {
	rc := &f.rc
	at := rc.off + int64(rc.n)
	if at >= final || at%int64(f.f.Alignment().Offset) != 0 {
		return
	}
	buf := rc.bufs[1-rc.cur].Bytes()
	err := f.ap.Queue().Submit(direct.Request{Op: direct.OpRead, Buf: buf, Off: at, Done: rc.aheadDone})
	if err == nil { // else no read-ahead: the next read waits for the device, that is all
		rc.ahead, rc.aheadOff, rc.aheadFinal = true, at, final
	}
}

// awaitAhead waits for the read-ahead in flight.
func (f *File) awaitAhead() direct.Completion {
	f.rc.ahead = false
	return f.ap.Queue().Await(f.rc.aheadDone)
}

func (f *File) freeReadCache() {
	for i, b := range f.rc.bufs {
		if b != nil {
			b.Free()
			f.rc.bufs[i] = nil
		}
	}
	f.rc.n = 0
}

// ReadBlob reads the blob at off, appending it to dst[:0].
func (f *File) ReadBlob(off int64, dst []byte) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return dst[:0], ErrClosed
	}
	// Read the header's first byte, and the rest only for a long header:
	// reading past a short header could move the read cache on to the
	// next buffer and send the payload read back to the one before,
	// which a sequential scan must never do.
	var h [blobio.MaxHeaderSize]byte
	if _, err := f.readAt(h[:1], off); err != nil {
		if err == io.EOF {
			err = fmt.Errorf("%w: offset %d is at or past the end", blobio.ErrOffset, off)
		}
		return dst[:0], err
	}
	n := 1
	hs, size, c, err := blobio.DecodeHeader(h[:n])
	if err == io.ErrUnexpectedEOF {
		k, rerr := f.readAt(h[1:], off+1)
		if rerr != nil && rerr != io.EOF {
			return dst[:0], rerr
		}
		n += k
		hs, size, c, err = blobio.DecodeHeader(h[:n])
	}
	if err != nil {
		return dst[:0], fmt.Errorf("ephemeral: blob at %d: %w", off, err)
	}
	if c != blobio.None {
		return dst[:0], fmt.Errorf("ephemeral: blob at %d: %w: compressed, and this file never compresses", off, blobio.ErrCorrupt)
	}
	dst = slices.Grow(dst[:0], size)[:size]
	if k, err := f.readAt(dst, off+int64(hs)); err != nil {
		if err == io.EOF {
			err = fmt.Errorf("ephemeral: blob at %d: %d of %d bytes: %w", off, k, size, io.ErrUnexpectedEOF)
		}
		return dst[:0], err
	}
	return dst, nil
}

// Flush writes everything appended so far (the last block padded with
// zeros) and waits for it. The bytes stay readable as before.
func (f *File) Flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	return f.ap.Flush()
}

// Sync flushes and fdatasyncs: for a caller that wants the bytes on the
// device, such as a benchmark comparing with durable writes. A temporary
// file never needs it for correctness.
func (f *File) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	return f.ap.Sync()
}

// Fd returns the file descriptor, for inspection (fstat, mincore); reads
// and writes go through the methods above.
func (f *File) Fd() uintptr { return f.f.Fd() }

// Close discards the file: nothing is flushed, the buffers go back to their
// pool, and the file's space is freed. Later calls return ErrClosed.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	f.closed = true
	if f.rc.ahead {
		f.awaitAhead()
	}
	err := f.ap.Discard()
	f.freeReadCache()
	return err
}
