package blobio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
)

// MaxBlobSize is the largest blob the format can store: 28 bits of length.
const MaxBlobSize = 0x0fff_ffff

// MaxHeaderSize is the length of the longest blob header, 4 bytes: a blob
// of 1 to 127 uncompressed bytes has a 1-byte header, any other (empty,
// longer, or compressed) a 4-byte one (Neon's blob_io.rs). A buffer of
// MaxHeaderSize bytes holds any header AppendHeader writes.
const MaxHeaderSize = 4

// Header bytes, from Neon's blob_io.rs.
const (
	shortMax          = 0x7f          // longest blob with a 1-byte header
	byteUncompressed  = 0x80          // first byte of a 4-byte header, no compression
	byteZstd          = 0x90          // first byte of a 4-byte header, zstd
	compressionMask   = 0xf0          // the long-header flag and the compression bits
	longHeaderSize    = MaxHeaderSize // the 4-byte header: a flag, 3 bits of compression, 28 bits of length
	minCompressedSize = shortMax + 1  // blobs shorter than this are never compressed
)

var (
	// ErrBlobTooLarge reports a blob longer than MaxBlobSize.
	ErrBlobTooLarge = errors.New("blobio: blob too large")
	// ErrCorrupt reports bytes that are not a valid blob. Errors matching
	// it are *CorruptError, which says where.
	ErrCorrupt = errors.New("blobio: corrupt blob")
	// ErrClosed reports use of a closed Writer, Reader or Scanner. It
	// matches fs.ErrClosed too, as os.File's errors do.
	ErrClosed = fmt.Errorf("blobio: %w", fs.ErrClosed)
	// ErrInvalidOptions reports Options that Create, OpenAppend or Open
	// refuse (OpenAppend's size among them), before any file is created or
	// changed.
	ErrInvalidOptions = errors.New("blobio: invalid options")
)

// A CorruptError reports bytes that are not a valid blob, at Off: a
// header with unknown compression bits, a blob cut short, zstd data that
// does not decode. It matches ErrCorrupt. Off is the offset of the
// blob's header, where a service recovering a log truncates it (as the
// WAL readers of Prometheus and etcd do) or which it reports:
//
//	var ce *blobio.CorruptError
//	if errors.As(err, &ce) {
//		size = ce.Off // keep the blobs before it
//	}
//
// Code that finds corruption at off reports &CorruptError{Off: off,
// Reason: "what is wrong", Err: cause}, Err being nil or the error
// behind it (zstd's); code that decodes bytes it read at some offset moves
// DecodeHeader's errors to the file's offsets with At.
type CorruptError struct {
	Off    int64  // offset of the blob's header
	Reason string // what is wrong, such as "compression bits 0xa0 in header"
	Err    error  // the cause, if another error reported it; may be nil
}

func (e *CorruptError) Error() string {
	s := fmt.Sprintf("blobio: corrupt blob at offset %d", e.Off)
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns the cause, if any.
func (e *CorruptError) Unwrap() error { return e.Err }

// At returns a copy of e for bytes that were read at file offset base: its
// Off, relative to those bytes (as DecodeHeader reports it), becomes the
// file's. e is not changed.
func (e *CorruptError) At(base int64) *CorruptError {
	return &CorruptError{Off: base + e.Off, Reason: e.Reason, Err: e.Err}
}

// corruptAt moves a *CorruptError in err, found in bytes read at file
// offset off, to the file's offsets; any other error is returned as it is.
func corruptAt(off int64, err error) error {
	var ce *CorruptError
	if !errors.As(err, &ce) {
		return err
	}
	return ce.At(off)
}

// Compression is how a blob's bytes are stored.
type Compression int

// The compressions.
const (
	None Compression = iota
	Zstd
)

func (c Compression) String() string {
	switch c {
	case None:
		return "none"
	case Zstd:
		return "zstd"
	}
	return fmt.Sprintf("Compression(%d)", int(c))
}

// HeaderSize returns the size of the header for a blob of n stored bytes.
func HeaderSize(n int, c Compression) int {
	if shortHeader(n, c) {
		return 1
	}
	return longHeaderSize
}

// shortHeader reports whether a blob of n stored bytes gets a 1-byte
// header. An empty blob does not: its 1-byte header would be 0x00, the
// byte that zero-filled preallocation and padding hold, so the writer
// gives it a 4-byte one (0x80 0 0 0, which Neon's reader decodes too) and
// a 0x00 where a header is due is never a header dio wrote.
func shortHeader(n int, c Compression) bool { return n > 0 && n <= shortMax && c == None }

// AppendHeader appends the header of a blob of n stored bytes to dst: one
// byte for an uncompressed blob of 1 to 127 bytes, else four. A
// compression other than None and Zstd gives an error matching
// ErrInvalidOptions, as Create gives it: the header has no bits for it.
func AppendHeader(dst []byte, n int, c Compression) ([]byte, error) {
	if n < 0 || n > MaxBlobSize {
		return dst, fmt.Errorf("%w: %d bytes, at most %d", ErrBlobTooLarge, n, MaxBlobSize)
	}
	if c != None && c != Zstd {
		return dst, fmt.Errorf("%w: unknown compression %v", ErrInvalidOptions, c)
	}
	if shortHeader(n, c) {
		return append(dst, byte(n)), nil
	}
	first := byte(byteUncompressed)
	if c == Zstd {
		first = byteZstd
	}
	return binary.BigEndian.AppendUint32(dst, uint32(first)<<24|uint32(n)), nil
}

// DecodeHeader parses the header at the start of p and returns its size,
// the stored length that follows it and the compression. If p is shorter
// than the header, the error is io.ErrUnexpectedEOF; unknown compression
// bits give a *CorruptError (matching ErrCorrupt) whose Off is 0, the
// start of p: a caller that read p at a file offset moves it there with
// CorruptError.At.
func DecodeHeader(p []byte) (size, n int, c Compression, err error) {
	if len(p) == 0 {
		return 0, 0, None, io.ErrUnexpectedEOF
	}
	if p[0] <= shortMax {
		return 1, int(p[0]), None, nil
	}
	if len(p) < longHeaderSize {
		return 0, 0, None, io.ErrUnexpectedEOF
	}
	switch p[0] & compressionMask {
	case byteUncompressed:
		c = None
	case byteZstd:
		c = Zstd
	default:
		return 0, 0, None, &CorruptError{Reason: fmt.Sprintf("compression bits %#02x in header", p[0]&compressionMask)}
	}
	n = int(binary.BigEndian.Uint32(p) & MaxBlobSize)
	return longHeaderSize, n, c, nil
}
