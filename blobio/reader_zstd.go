package blobio

import (
	"errors"
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

// The room a zstd blob is first decoded into: zstdFirstRatio times its
// stored size, at least two blocks, at most its bound. Only a blob that
// decodes to more is given its bound (see decode).
const (
	zstdFirstRatio = 16
	zstdFirstRoom  = 2 * zstdMaxBlockSize
)

// zstdMaxWindow is the decoder's memory and window limit: 2^28, the least
// window descriptor that covers a frame of MaxBlobSize bytes (see
// stripFCS). What a blob decodes to is held to MaxBlobSize by the
// capacity decode gives DecodeAll, never more than the blob's bound.
const zstdMaxWindow = 1 << 28

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
			zstd.WithDecoderMaxMemory(zstdMaxWindow),
			zstd.WithDecoderMaxWindow(zstdMaxWindow),
			// DecodeAll fills dst up to its capacity and no further, so
			// the capacity decode gives it is the allocation bound
			// (issue 12, item 4).
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
//
// What a zstd blob gets is sized by what it decodes to, never by what it
// claims: neither a frame header's content size nor its block count (a
// 4 KiB blob of empty compressed blocks may claim 96 MiB, and its blocks
// could hold that much; issue 12, item 4). It is first decoded into room
// for zstdFirstRatio times its stored size (or dst's capacity, if
// larger), any content size that does not fit that room left out of its
// frame header and checked afterwards. Only a blob that ran out of that
// room is decoded again, into its bound (zstdWalk), at most MaxBlobSize:
// as much as a real bomb is given before it is told from a large blob.
func (p *decoderPool) decode(payload []byte, c Compression, dst []byte) ([]byte, error) {
	if c == None {
		return append(dst[:0], payload...), nil
	}
	// A blob is one frame, as the Writer makes it, or a few: room for
	// them on the stack keeps a read of a blob free of allocations.
	var room [4]zstdFrame
	frames, rest, bound, err := zstdWalk(payload, room[:0])
	if err != nil {
		return dst[:0], err
	}
	dec, err := p.get()
	if err != nil {
		return dst[:0], err
	}
	first := bound
	if len(payload) < bound/zstdFirstRatio { // and 16x fits an int on 32 bits
		first = min(bound, max(zstdFirstRoom, zstdFirstRatio*len(payload)))
	}
	out := dst[:0]
	if cap(out) < first {
		out = make([]byte, 0, first)
	}
	for {
		out = out[:0:min(cap(out), bound)]
		got, err := decodeFrames(dec, payload, frames, rest, out)
		if err == nil {
			if sameMemory(got, dst) {
				got = dst[:len(got)] // dst's whole capacity, for the caller's next blob
			}
			return got, nil
		}
		if cap(out) < bound && ranOut(got, err) {
			out = make([]byte, 0, bound)
			continue
		}
		var ce *CorruptError
		if !errors.As(err, &ce) {
			err = &CorruptError{Reason: "zstd", Err: err}
		}
		return dst[:0], err
	}
}

// ranOut reports whether a decode into got's capacity that failed with
// err may have failed for want of room: the decoder says so, or (its
// sequence decoder only says "output bigger than max block size") less
// than a block of room was left after the blocks it finished.
func ranOut(got []byte, err error) bool {
	var ce *CorruptError
	switch {
	case errors.As(err, &ce):
		return false // a claim checked after a whole decode
	case errors.Is(err, zstd.ErrDecoderSizeExceeded):
		return true
	}
	return cap(got)-len(got) < zstdMaxBlockSize+zstdBlockSlack
}

// zstdBlockSlack is what klauspost's decoder may want past a block's
// output in the buffer it decodes into (its compressedBlockOverAlloc).
const zstdBlockSlack = 64

// decodeFrames appends what frames (and rest, bytes the walk could not
// follow) decode to to out, within out's capacity: a frame whose content
// size does not fit there is decoded without it, then checked against it.
// On an error it returns what was decoded before it.
func decodeFrames(dec *zstd.Decoder, payload []byte, frames []zstdFrame, rest []byte, out []byte) ([]byte, error) {
	for _, f := range frames {
		in := payload[f.start:f.end]
		if f.fcs > int64(cap(out)-len(out)) {
			in = stripFCS(in, f)
		}
		n := len(out)
		got, err := dec.DecodeAll(in, out)
		if err != nil {
			return partial(got, out), err
		}
		out = got
		if got := int64(len(out) - n); f.fcs >= 0 && got != f.fcs {
			return out, &CorruptError{Reason: fmt.Sprintf("zstd frame claims %d bytes and decodes to %d", f.fcs, got)}
		}
	}
	if len(rest) > 0 {
		got, err := dec.DecodeAll(rest, out)
		if err != nil {
			return partial(got, out), err
		}
		out = got
	}
	return out, nil
}

// partial returns what a failed DecodeAll into out decoded: got, if it
// is still in out's memory, else out.
func partial(got, out []byte) []byte {
	if len(got) >= len(out) && cap(got) == cap(out) && sameMemory(got, out) {
		return got
	}
	return out
}

// sameMemory reports whether a and b start at the same address.
func sameMemory(a, b []byte) bool {
	return cap(a) > 0 && cap(b) > 0 && &a[:1][0] == &b[:1][0]
}

// A zstdFrame is where one frame of a blob is, and what its header says.
type zstdFrame struct {
	start, end int   // the frame, header to checksum, in the payload
	hdr        int   // the frame header's length
	fcs        int64 // the content size its header claims, or -1
}

// stripFCS returns a copy of frame f (in) whose header claims no content
// size: Frame_Content_Size dropped, and a single-segment frame given a
// Window_Descriptor covering the content size it claimed, the window it
// decodes with (RFC 8878, 3.1.1.1.1-3.1.1.1.4). The blocks and the
// checksum are unchanged.
func stripFCS(in []byte, f zstdFrame) []byte {
	fhd := in[4]
	single := fhd&0x20 != 0
	dictLen := [4]int{0, 1, 2, 4}[fhd&3]
	out := make([]byte, 0, len(in)+1)
	out = append(out, in[:4]...)
	out = append(out, fhd&^0xe0) // no FCS field, not single-segment
	pos := 5
	if single {
		out = append(out, windowDescriptor(uint64(max(f.fcs, 1<<10))))
	} else {
		out = append(out, in[pos])
		pos++
	}
	out = append(out, in[pos:pos+dictLen]...)
	return append(out, in[f.hdr:]...)
}

// windowDescriptor returns the Window_Descriptor of the least window of
// at least w bytes: 2^(10+exponent) plus mantissa eighths of it.
func windowDescriptor(w uint64) byte {
	for exp := range 32 {
		base := uint64(1) << (10 + exp)
		for mant := range 8 {
			if base+base/8*uint64(mant) >= w {
				return byte(exp<<3 | mant)
			}
		}
	}
	return 0xff
}

// zstdWalk walks the zstd frames in p by their block headers and returns
// them (appended to frames), the bytes past the last frame it could follow (rest, left to
// DecodeAll), and the most the frames can decode to, at most MaxBlobSize:
// a raw or RLE block says what it decodes to, a compressed block decodes
// to at most zstdMaxBlockSize. A frame whose header claims more than its
// blocks can hold, or more than MaxBlobSize, is corrupt: so a 4 KiB blob
// claiming 512 MiB costs nothing, where DecodeAll alone would allocate up
// to 32 KiB of output per input byte before it failed; raw and RLE blocks
// that alone decode to more than MaxBlobSize are corrupt before anything
// is decoded. The bound is only a ceiling (empty compressed blocks count
// as full ones): decode sizes nothing by it until a blob has decoded to
// more than its first room.
func zstdWalk(p []byte, frames []zstdFrame) (_ []zstdFrame, rest []byte, bound int, err error) {
	var total, exact int64 // exact: what raw and RLE blocks decode to, at least
	pos := 0
	for pos < len(p) {
		var h zstd.Header
		body, err := h.DecodeAndStrip(p[pos:])
		if err != nil {
			break // not a frame: DecodeAll reports it
		}
		hdr := len(p) - pos - len(body)
		if h.Skippable {
			if uint64(h.SkippableSize) > uint64(len(body)) {
				break
			}
			pos += hdr + int(h.SkippableSize)
			continue
		}
		var frame int64
		blocks := body
		for {
			if len(blocks) < zstdBlockHeaderSize {
				return nil, nil, 0, &CorruptError{Reason: "zstd: truncated block header"}
			}
			bh := uint32(blocks[0]) | uint32(blocks[1])<<8 | uint32(blocks[2])<<16
			last, typ, size := bh&1 != 0, (bh>>1)&3, int(bh>>3)
			blocks = blocks[zstdBlockHeaderSize:]
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
				return nil, nil, 0, &CorruptError{Reason: "zstd: reserved block type"}
			}
			if stored > len(blocks) {
				return nil, nil, 0, &CorruptError{Reason: fmt.Sprintf("zstd: block of %d bytes past the end of the blob", stored)}
			}
			blocks = blocks[stored:]
			if exact > MaxBlobSize {
				return nil, nil, 0, &CorruptError{Reason: "zstd blocks decode to more than MaxBlobSize"}
			}
			if last {
				break
			}
		}
		fcs := int64(-1)
		if h.HasFCS {
			if h.FrameContentSize > MaxBlobSize {
				return nil, nil, 0, &CorruptError{Reason: fmt.Sprintf("zstd frame claims %d bytes, more than MaxBlobSize", h.FrameContentSize)}
			}
			if h.FrameContentSize > uint64(frame) {
				return nil, nil, 0, &CorruptError{Reason: fmt.Sprintf("zstd frame claims %d bytes, its blocks hold at most %d", h.FrameContentSize, frame)}
			}
			fcs = int64(h.FrameContentSize)
			frame = fcs
		}
		if h.HasCheckSum {
			if len(blocks) < zstdChecksumSize {
				return nil, nil, 0, &CorruptError{Reason: "zstd: truncated checksum"}
			}
			blocks = blocks[zstdChecksumSize:]
		}
		end := len(p) - len(blocks)
		frames = append(frames, zstdFrame{start: pos, end: end, hdr: hdr, fcs: fcs})
		total = min(total+frame, MaxBlobSize)
		pos = end
	}
	return frames, p[pos:], int(total), nil
}

// zstdBound returns the most the zstd frames in p can decode to, at most
// MaxBlobSize, or why they are corrupt: zstdWalk's bound.
func zstdBound(p []byte) (int, error) {
	_, _, bound, err := zstdWalk(p, nil)
	return bound, err
}
