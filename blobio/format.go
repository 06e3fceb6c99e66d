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

// Header bytes, from Neon's blob_io.rs.
const (
	shortMax          = 0x7f // longest blob with a 1-byte header
	byteUncompressed  = 0x80 // first byte of a 4-byte header, no compression
	byteZstd          = 0x90 // first byte of a 4-byte header, zstd
	compressionMask   = 0xf0 // the long-header flag and the compression bits
	longHeaderSize    = 4
	MaxHeaderSize     = longHeaderSize
	minCompressedSize = shortMax + 1 // blobs shorter than this are never compressed
)

var (
	// ErrBlobTooLarge reports a blob longer than MaxBlobSize.
	ErrBlobTooLarge = errors.New("blobio: blob too large")
	// ErrCorrupt reports bytes that are not a valid blob.
	ErrCorrupt = errors.New("blobio: corrupt blob")
	// ErrClosed reports use of a closed Writer, Reader or Scanner. It
	// matches fs.ErrClosed too, as os.File's errors do.
	ErrClosed = fmt.Errorf("blobio: %w", fs.ErrClosed)
	// ErrInvalidOptions reports Options that Create or Open refuse, before
	// any file is created.
	ErrInvalidOptions = errors.New("blobio: invalid options")
)

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
// byte for an uncompressed blob of 1 to 127 bytes, else four.
func AppendHeader(dst []byte, n int, c Compression) ([]byte, error) {
	if n < 0 || n > MaxBlobSize {
		return dst, fmt.Errorf("%w: %d bytes, at most %d", ErrBlobTooLarge, n, MaxBlobSize)
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
// bits give ErrCorrupt.
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
		return 0, 0, None, fmt.Errorf("%w: compression bits %#02x in header", ErrCorrupt, p[0]&compressionMask)
	}
	n = int(binary.BigEndian.Uint32(p) & MaxBlobSize)
	return longHeaderSize, n, c, nil
}
