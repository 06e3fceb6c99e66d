package blobio

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/fallback"
)

// ErrOffset reports a blob offset outside the file.
var ErrOffset = errors.New("blobio: offset outside the file")

// maxDecoded bounds what one zstd blob may expand to, so corrupt input
// cannot exhaust memory.
const maxDecoded = 1 << 30

// A Reader reads blobs from a file by offset. It is safe for concurrent
// use.
type Reader struct {
	f       fallback.File
	size    int64
	align   int // offset alignment
	memAl   int // memory alignment
	winSize int // a buffer plus a block, so a header straddling blocks fits
	bufSize int // the Scanner's read size: BufferSize, or DefaultScanRead if unset

	mu       sync.Mutex
	win      *aligned.Buffer // the last aligned window read
	winOff   int64
	winLen   int
	dec      *zstd.Decoder
	scanners map[*Scanner]struct{}
	closed   bool
}

// Open opens the blob file at path for reading.
func Open(path string, o *Options) (*Reader, error) {
	opts := o.withDefaults()
	f, err := fallback.Open(path, os.O_RDONLY, 0, opts.IO)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.IsDir() {
		f.Close()
		return nil, &os.PathError{Op: "open", Path: path, Err: errors.New("is a directory")}
	}
	a := f.Alignment()
	block := max(a.Block(), 512)
	scan := opts.BufferSize
	if o == nil || o.BufferSize <= 0 {
		scan = DefaultScanRead
	}
	return &Reader{
		f:        f,
		size:     st.Size(),
		align:    a.Offset,
		memAl:    max(a.Memory, 512),
		winSize:  aligned.Up(opts.BufferSize, block) + block,
		bufSize:  aligned.Up(scan, block),
		scanners: map[*Scanner]struct{}{},
	}, nil
}

// Size returns the size of the file when it was opened.
func (r *Reader) Size() int64 { return r.size }

// Mode reports the I/O path the reader uses.
func (r *Reader) Mode() fallback.Mode { return r.f.Mode() }

// ReadBlob reads the blob at off, appending it to dst[:0]. The header and
// the blob come in one aligned read when they fit one window, wherever the
// header sits in its block. A blob that runs past the end of the file gives
// an error matching io.ErrUnexpectedEOF; bad header bits give ErrCorrupt.
func (r *Reader) ReadBlob(off int64, dst []byte) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return dst[:0], ErrClosed
	}
	if off < 0 || off >= r.size {
		return dst[:0], fmt.Errorf("%w: offset %d, size %d", ErrOffset, off, r.size)
	}
	// The header, from the cached window or a new one starting at its block.
	if !r.cached(off, min(off+MaxHeaderSize, r.size)) {
		if err := r.fill(off); err != nil {
			return dst[:0], err
		}
	}
	hs, n, c, err := DecodeHeader(r.from(off))
	if err != nil {
		return dst[:0], fmt.Errorf("blobio: blob at %d: %w", off, err)
	}
	start, end := off+int64(hs), off+int64(hs)+int64(n)
	if end > r.size {
		return dst[:0], fmt.Errorf("blobio: blob at %d: %d bytes run past the end of the file at %d: %w", off, n, r.size, io.ErrUnexpectedEOF)
	}
	if !r.cached(start, end) && end-aligned.Down(off, int64(r.align)) <= int64(r.winSize) {
		// Header and blob fit one window: read it from the header's block.
		if err := r.fill(off); err != nil {
			return dst[:0], err
		}
	}
	if r.cached(start, end) {
		return r.decode(r.from(start)[:n], c, dst)
	}
	big, payload, err := r.readLarge(start, end)
	if err != nil {
		return dst[:0], err
	}
	defer big.Free()
	return r.decode(payload, c, dst)
}

func (r *Reader) decode(payload []byte, c Compression, dst []byte) ([]byte, error) {
	if c == None {
		return append(dst[:0], payload...), nil
	}
	if r.dec == nil {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxDecoded))
		if err != nil {
			return dst[:0], err
		}
		r.dec = d
	}
	out, err := r.dec.DecodeAll(payload, dst[:0])
	if err != nil {
		return dst[:0], fmt.Errorf("%w: zstd: %w", ErrCorrupt, err)
	}
	return out, nil
}

// cached reports whether the window holds [start, end).
func (r *Reader) cached(start, end int64) bool {
	return r.winLen > 0 && start >= r.winOff && end <= r.winOff+int64(r.winLen)
}

// from returns the window's bytes from off, which it holds, to its end.
func (r *Reader) from(off int64) []byte {
	return r.win.Bytes()[off-r.winOff : r.winLen]
}

// fill reads the window that starts at off's block.
func (r *Reader) fill(off int64) error {
	if r.win == nil {
		b, err := aligned.New(r.winSize, r.memAl)
		if err != nil {
			return err
		}
		r.win = b
	}
	lo := aligned.Down(off, int64(r.align))
	r.winLen = 0
	n, err := r.f.ReadAt(r.win.Bytes(), lo)
	if err != nil && err != io.EOF {
		return err
	}
	r.winOff, r.winLen = lo, n
	if off >= lo+int64(n) {
		return fmt.Errorf("blobio: reading at %d: file ends at %d: %w", off, lo+int64(n), io.ErrUnexpectedEOF)
	}
	return nil
}

// readLarge reads [start, end), larger than a window, into a buffer of its
// own, which the caller frees.
func (r *Reader) readLarge(start, end int64) (*aligned.Buffer, []byte, error) {
	lo := aligned.Down(start, int64(r.align))
	hi := aligned.Up(end, int64(r.align))
	b, err := aligned.New(int(aligned.Up(hi-lo, int64(max(r.align, r.memAl)))), r.memAl)
	if err != nil {
		return nil, nil, err
	}
	n, err := r.f.ReadAt(b.Bytes(), lo)
	if err != nil && err != io.EOF {
		b.Free()
		return nil, nil, err
	}
	if int64(n) < end-lo {
		b.Free()
		return nil, nil, fmt.Errorf("blobio: reading [%d, %d): file ends at %d: %w", start, end, lo+int64(n), io.ErrUnexpectedEOF)
	}
	return b, b.Bytes()[start-lo : end-lo], nil
}

// Close releases the reader, its scanners and its file.
func (r *Reader) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	r.closed = true
	scanners := r.scanners
	r.scanners = nil
	r.mu.Unlock()
	for s := range scanners {
		s.finish(ErrClosed)
	}
	if r.win != nil {
		r.win.Free()
	}
	if r.dec != nil {
		r.dec.Close()
	}
	return r.f.Close()
}
