package ephemeral

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/appender"
)

// ErrClosed reports use of a closed File.
var ErrClosed = errors.New("ephemeral: file closed")

// Options configure Create. A nil *Options means defaults.
type Options struct {
	BufferSize int             // bytes per buffer; default 64 KiB, rounded up to the file's alignment
	Buffers    int             // buffers per file; default: two 512 KiB writes of merged neighbours (16 of 64 KiB), at least 4
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

	// bounce is the aligned buffer disk reads land in, allocated at the
	// first one. It is the file's own, outside any shared pool: a reader
	// waiting on a pool whose budget the writers hold would never wake.
	bounceMu sync.Mutex
	bounce   *aligned.Buffer
	bufSize  int
	// The bounce buffer doubles as a read-ahead cache: it holds the file's
	// bytes [cacheOff, cacheOff+cacheLen), all of them final on disk when
	// read. A read that starts where the cache ends doubles the next
	// read's size, up to the whole bounce buffer (maxReadAhead buffers),
	// as the kernel's readahead does; any other read resets it to one
	// buffer, so random reads are not inflated.
	cacheOff  int64
	cacheLen  int
	readAhead int
}

// maxReadAhead is the bounce buffer's size in buffers: sequential reads of
// 256 KiB instead of 64 KiB run at about twice the speed on the disks
// measured here.
const maxReadAhead = 4

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
	return &File{ap: ap, f: f, bufSize: ap.BufferSize()}, nil
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
	if off < 0 {
		return 0, fmt.Errorf("ephemeral: read at negative offset %d", off)
	}
	size := f.ap.Size()
	end := min(off+int64(len(p)), size)
	pos := off
	for pos < end {
		mem, next := f.ap.Cached(pos)
		if mem != nil {
			pos += int64(copy(p[pos-off:end-off], mem))
			continue
		}
		n, err := f.readDisk(p[pos-off:min(next, end)-off], pos, next)
		pos += int64(n)
		if err != nil {
			return int(pos - off), err
		}
	}
	if n := int(pos - off); n < len(p) {
		return n, io.EOF
	}
	return len(p), nil
}

// readDisk fills p from the file at off with aligned reads of a whole
// buffer through the bounce buffer, which it keeps as a read-ahead cache.
// The caller holds f.mu, and [off, final) is on disk for good.
func (f *File) readDisk(p []byte, off, final int64) (int, error) {
	f.bounceMu.Lock()
	defer f.bounceMu.Unlock()
	if f.bounce == nil {
		b, err := aligned.New(maxReadAhead*f.bufSize, max(f.f.Alignment().Memory, 512))
		if err != nil {
			return 0, err
		}
		f.bounce, f.readAhead = b, f.bufSize
	}
	align := int64(f.f.Alignment().Offset)
	done := 0
	for done < len(p) {
		pos := off + int64(done)
		if pos >= f.cacheOff && pos < f.cacheOff+int64(f.cacheLen) {
			done += copy(p[done:], f.bounce.Bytes()[pos-f.cacheOff:f.cacheLen])
			continue
		}
		lo := aligned.Down(pos, align)
		if f.cacheLen > 0 && pos == f.cacheOff+int64(f.cacheLen) {
			f.readAhead = min(2*f.readAhead, f.bounce.Size())
		} else {
			f.readAhead = f.bufSize
		}
		f.cacheLen = 0
		n, err := f.f.ReadAt(f.bounce.Bytes()[:f.readAhead], lo)
		if err != nil && err != io.EOF {
			return done, err
		}
		f.cacheOff, f.cacheLen = lo, int(min(int64(n), final-lo))
		if f.cacheLen <= int(pos-lo) {
			f.cacheLen = 0
			return done, fmt.Errorf("ephemeral: reading at %d: file ends at %d: %w", pos, lo+int64(n), io.ErrUnexpectedEOF)
		}
	}
	return done, nil
}

// ReadBlob reads the blob at off, appending it to dst[:0].
func (f *File) ReadBlob(off int64, dst []byte) ([]byte, error) {
	var h [blobio.MaxHeaderSize]byte
	n, err := f.ReadAt(h[:], off)
	if err != nil && (err != io.EOF || n == 0) {
		if err == io.EOF {
			err = fmt.Errorf("%w: offset %d is at or past the end", blobio.ErrOffset, off)
		}
		return dst[:0], err
	}
	hs, size, c, err := blobio.DecodeHeader(h[:n])
	if err != nil {
		return dst[:0], fmt.Errorf("ephemeral: blob at %d: %w", off, err)
	}
	if c != blobio.None {
		return dst[:0], fmt.Errorf("ephemeral: blob at %d: %w: compressed, and this file never compresses", off, blobio.ErrCorrupt)
	}
	dst = slices.Grow(dst[:0], size)[:size]
	if k, err := f.ReadAt(dst, off+int64(hs)); err != nil {
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
	if f.bounce != nil {
		f.bounce.Free()
	}
	return f.ap.Discard()
}
