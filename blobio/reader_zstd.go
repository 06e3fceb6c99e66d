package blobio

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// zstd's limits, from its format (RFC 8878, 3.1.1.2).
const (
	zstdBlockHeaderSize = 3
	zstdMaxBlockSize    = 128 << 10 // Block_Maximum_Size: what one block decodes to at most
	zstdChecksumSize    = 4
)

// A decoderPool decodes zstd blobs for any number of goroutines at once,
// each outside any lock. Its decoder is created on first use; it holds at
// most GOMAXPROCS block decoders, handed out through a bounded channel
// inside zstd.Decoder (DecodeAll waits for a free one).
type decoderPool struct {
	once sync.Once
	dec  *zstd.Decoder
	err  error
}

func (p *decoderPool) get() (*zstd.Decoder, error) {
	p.once.Do(func() {
		p.dec, p.err = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
			// Nothing past MaxBlobSize is ever produced: neither by a
			// frame header claiming more nor by a frame that decodes to
			// more (issue 12, item 4).
			zstd.WithDecoderMaxMemory(MaxBlobSize),
			zstd.WithDecoderMaxWindow(MaxBlobSize),
			// DecodeAll fills dst up to its capacity and no further, so
			// the capacity decode gives it is the allocation bound.
			zstd.WithDecodeAllCapLimit(true),
		)
	})
	return p.dec, p.err
}

func (p *decoderPool) close() {
	if p.dec != nil {
		p.dec.Close()
	}
}

// decode appends the blob stored in payload with compression c to dst[:0].
// A zstd payload is decoded into a buffer sized by zstdBound, never by what
// a frame header claims alone.
func (p *decoderPool) decode(payload []byte, c Compression, dst []byte) ([]byte, error) {
	if c == None {
		return append(dst[:0], payload...), nil
	}
	bound, err := zstdBound(payload)
	if err != nil {
		return dst[:0], err
	}
	dec, err := p.get()
	if err != nil {
		return dst[:0], err
	}
	if cap(dst) < bound {
		dst = make([]byte, 0, bound)
	}
	out, err := dec.DecodeAll(payload, dst[:0])
	if err != nil {
		return dst[:0], &CorruptError{Reason: "zstd", Err: err}
	}
	return out, nil
}

// zstdBound returns the most the zstd frames in p can decode to, at most
// MaxBlobSize, by walking their block headers: a raw or RLE block says what
// it decodes to, a compressed block decodes to at most zstdMaxBlockSize. A
// frame whose header claims more than its blocks can hold, or more than
// MaxBlobSize, is corrupt: so a 4 KiB blob claiming 512 MiB costs nothing,
// where DecodeAll alone would allocate up to 32 KiB of output per input
// byte before it failed; raw and RLE blocks that alone decode to more than
// MaxBlobSize are corrupt before anything is decoded. Bytes the walk cannot follow are left to
// DecodeAll, whose capacity limit still holds it to the bound.
func zstdBound(p []byte) (int, error) {
	var total, exact int64 // exact: what raw and RLE blocks decode to, at least
	for len(p) > 0 {
		var h zstd.Header
		rest, err := h.DecodeAndStrip(p)
		if err != nil {
			break // not a frame: DecodeAll reports it
		}
		if h.Skippable {
			if uint64(h.SkippableSize) > uint64(len(rest)) {
				break
			}
			p = rest[h.SkippableSize:]
			continue
		}
		var frame int64
		for {
			if len(rest) < zstdBlockHeaderSize {
				return 0, &CorruptError{Reason: "zstd: truncated block header"}
			}
			bh := uint32(rest[0]) | uint32(rest[1])<<8 | uint32(rest[2])<<16
			last, typ, size := bh&1 != 0, (bh>>1)&3, int(bh>>3)
			rest = rest[zstdBlockHeaderSize:]
			stored := size
			switch typ {
			case 0: // raw
				frame += int64(size)
				exact += int64(size)
			case 1: // RLE: one byte, repeated size times
				frame += int64(size)
				exact += int64(size)
				stored = 1
			case 2: // compressed
				frame += zstdMaxBlockSize
			default:
				return 0, &CorruptError{Reason: "zstd: reserved block type"}
			}
			if stored > len(rest) {
				return 0, &CorruptError{Reason: fmt.Sprintf("zstd: block of %d bytes past the end of the blob", stored)}
			}
			rest = rest[stored:]
			if exact > MaxBlobSize {
				return 0, &CorruptError{Reason: "zstd blocks decode to more than MaxBlobSize"}
			}
			if last {
				break
			}
		}
		if h.HasFCS {
			if h.FrameContentSize > MaxBlobSize {
				return 0, &CorruptError{Reason: fmt.Sprintf("zstd frame claims %d bytes, more than MaxBlobSize", h.FrameContentSize)}
			}
			if h.FrameContentSize > uint64(frame) {
				return 0, &CorruptError{Reason: fmt.Sprintf("zstd frame claims %d bytes, its blocks hold at most %d", h.FrameContentSize, frame)}
			}
			frame = int64(h.FrameContentSize)
		}
		if h.HasCheckSum {
			if len(rest) < zstdChecksumSize {
				return 0, &CorruptError{Reason: "zstd: truncated checksum"}
			}
			rest = rest[zstdChecksumSize:]
		}
		total = min(total+frame, MaxBlobSize)
		p = rest
	}
	return int(total), nil
}
