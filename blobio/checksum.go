package blobio

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/dio-storage/dio/internal/appender"
)

// Checksums (Options.Checksum).
//
// A checksummed blob is an ordinary blob of the format whose stored bytes
// end in a seal: the CRC32C (Castagnoli, computed with the CPU's crc32
// instruction by hash/crc32) of the blob's header and every stored byte
// before the CRC, big-endian, as the header is. The header's length counts
// the seal, so a reader that knows nothing of it (Neon's) still walks the
// file blob by blob:
//
//	uncompressed: header | payload | crc
//	zstd:         header | zstd frame | skippable frame header | crc
//
// A zstd blob's CRC sits in a zstd skippable frame (RFC 8878, 3.1.2: magic
// 0x184D2A50, a 4-byte length, then that many bytes, which a decoder
// skips), so that the stored bytes are still a zstd stream that decodes to
// the payload, in Neon's reader as in any other.
//
// The CRC covers the stored bytes, not the decoded ones: a reader checks a
// blob before it hands a byte of it to the zstd decoder (corrupt input
// never reaches it, and a Scanner or ReadBlobs checks at memory speed
// without decoding anything twice), and zstd frames carry their own
// checksum of the decoded content (klauspost's encoder writes it by
// default) for the decoder's side. It covers the header too, whose
// compression bits nothing else checks: a flipped 0x80 into 0x90 would
// otherwise turn a payload into an attempt at decoding it, and 0x90 into
// 0x80 hand back a zstd frame as data. The header is rebuilt from the
// stored length and the compression (AppendHeader), as the Writer wrote
// it, so a header in any other encoding fails too.
const (
	crcSize = 4

	// zstdSkippableMagic begins a zstd skippable frame; the frame's
	// length follows, little-endian (RFC 8878, 3.1.2).
	zstdSkippableMagic = 0x184D2A50
	zstdSkipHeader     = 8 // magic and length
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crcSmall is crc32.Update for the few bytes of a header or a skippable
// frame's, a byte at a time from the table: a call into hash/crc32 costs
// more than that (measured: 15 ns for 4 bytes, against 73 for 100).
func crcSmall(crc uint32, p []byte) uint32 {
	crc = ^crc
	for _, v := range p {
		crc = castagnoli[byte(crc)^v] ^ crc>>8
	}
	return ^crc
}

// sealSize returns how many bytes the seal adds to a blob stored with c.
func sealSize(c Compression) int {
	if c == Zstd {
		return zstdSkipHeader + crcSize
	}
	return crcSize
}

// appendSkip appends a zstd skippable frame's header for a CRC to dst.
func appendSkip(dst []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, zstdSkippableMagic)
	return binary.LittleEndian.AppendUint32(dst, crcSize)
}

// appendSeal appends the seal of the blob with header hdr and stored bytes
// data (its length in hdr counting the seal) to dst.
func appendSeal(dst, hdr, data []byte, c Compression) []byte {
	start := len(dst)
	if c == Zstd {
		dst = appendSkip(dst)
	}
	sum := crcSmall(0, hdr)
	sum = crc32.Update(sum, castagnoli, data)
	sum = crcSmall(sum, dst[start:])
	return binary.BigEndian.AppendUint32(dst, sum)
}

// headerSum returns the CRC of the header the Writer writes for a blob
// of n stored bytes with compression c (AppendHeader's bytes, kept on the
// stack).
func headerSum(n int, c Compression) (uint32, error) {
	var h [MaxHeaderSize]byte
	if n < 0 || n > MaxBlobSize {
		return 0, fmt.Errorf("%w: %d bytes, at most %d", ErrBlobTooLarge, n, MaxBlobSize)
	}
	if shortHeader(n, c) {
		h[0] = byte(n)
		return crcSmall(0, h[:1]), nil
	}
	first := uint32(byteUncompressed)
	if c == Zstd {
		first = byteZstd
	}
	binary.BigEndian.PutUint32(h[:], first<<24|uint32(n))
	return crcSmall(0, h[:]), nil
}

// noSumHint ends the reason of every seal that fails. A file carries no
// mark of the Checksum it was written with (Neon's format has no file
// header to hold one), so a file written without it, read with it, fails
// at every blob exactly as corruption does; the error says so.
const noSumHint = " (or the file was written without Options.Checksum)"

// unseal checks the seal of stored, a blob's stored bytes with
// compression c, and returns them without it. A mismatch, or a blob too
// short to hold a seal, is a *CorruptError at the blob (Off 0).
func unseal(stored []byte, c Compression) ([]byte, error) {
	k := sealSize(c)
	if len(stored) < k {
		return nil, &CorruptError{Reason: fmt.Sprintf("%d stored bytes cannot hold a %d-byte checksum", len(stored), k) + noSumHint}
	}
	body, got := stored[:len(stored)-crcSize], binary.BigEndian.Uint32(stored[len(stored)-crcSize:])
	sum, err := headerSum(len(stored), c)
	if err != nil {
		return nil, &CorruptError{Reason: "checksum: " + err.Error()}
	}
	if sum = crc32.Update(sum, castagnoli, body); sum != got {
		return nil, &CorruptError{Reason: fmt.Sprintf("checksum mismatch: stored %#08x, computed %#08x", got, sum) + noSumHint}
	}
	if c == Zstd {
		skip := body[len(body)-zstdSkipHeader:]
		if binary.LittleEndian.Uint32(skip) != zstdSkippableMagic || binary.LittleEndian.Uint32(skip[4:]) != crcSize {
			return nil, &CorruptError{Reason: "checksum: no skippable frame before the CRC" + noSumHint}
		}
		body = body[:len(body)-zstdSkipHeader]
	}
	return body, nil
}

// sealedCopyMax is the longest stored blob the Writer copies, with its
// header and seal, into one record: one CRC call over the whole and one
// lock pair in the appender, for a copy of at most this much. A longer
// blob is written as the record and then the seal.
const sealedCopyMax = 1 << 10

// writeSealed appends the blob with header hdr, stored bytes data and
// compression c, followed by its seal, and returns its offset.
func (w *Writer) writeSealed(hdr, data []byte, c Compression) (int64, error) {
	if len(data) <= sealedCopyMax {
		b := append(append(w.sealed[:0], hdr...), data...)
		if c == Zstd {
			b = appendSkip(b)
		}
		b = binary.BigEndian.AppendUint32(b, crc32.Update(0, castagnoli, b))
		w.sealed = b
		return w.ap.WriteRecord(b[:len(hdr)], b[len(hdr):])
	}
	seal := appendSeal(w.seal[:0], hdr, data, c)
	off, err := w.ap.WriteRecord(hdr, data)
	if err != nil {
		return off, err
	}
	if _, err := w.ap.WriteTrailer(seal); err != nil {
		return 0, err
	}
	return off, nil
}

// maxPayload is the longest payload a Writer takes: MaxBlobSize, less
// the seal when it checksums.
func (w *Writer) maxPayload() int {
	if w.sum {
		return MaxBlobSize - sealSize(None)
	}
	return MaxBlobSize
}

// storedLen returns the length in the header of a blob whose stored bytes
// are n long with compression c: n, plus the seal when w checksums.
func (w *Writer) storedLen(n int, c Compression) int {
	if w.sum {
		return n + sealSize(c)
	}
	return n
}

// checked returns the stored bytes of a blob read by r, its seal checked
// and removed when r checksums.
func (r *Reader) checked(stored []byte, c Compression) ([]byte, error) {
	if !r.sum {
		return stored, nil
	}
	return unseal(stored, c)
}

// unseal checks the seal of the blob at s.pos, whose stored bytes p end at
// end, and returns them without it. A mismatch where the written data
// ends soon after (dataEnds), over a Reader opened without Options.Size,
// is a torn tail: unseal returns nil and no error, and the scan ends
// there (see Torn).
func (s *Scanner) unseal(p []byte, c Compression, end int64) ([]byte, error) {
	body, err := unseal(p, c)
	if err == nil {
		if body == nil {
			body = []byte{} // an empty blob: not the end of the scan
		}
		return body, nil
	}
	if s.bounded || !s.dataEnds(end) {
		return nil, err // blobs follow it: corruption, not a torn tail
	}
	s.torn = true
	return nil, nil
}

// What a crash leaves after the blobs it tore, which a Scanner looks for
// past a blob whose seal fails before it takes the blob for a torn tail.
// The Writer grows the file ahead of its writes (by a megabyte at least)
// and pads to the alignment, so a crash leaves zeros past the written
// data: tornZeros of them in a row, or zeros to the end of a file cut
// short (sectorZeros at least). The writes in flight at the crash, whose
// sectors may have landed in any order, can put data between the blob
// and those zeros: the Writer has two merged writes of 512 KiB in flight
// with default Options, tornSpan in all. A sector zeroed in the middle of
// a file (a lost write) is followed by blobs to well past tornSpan, or to
// the file's end: corruption to report, not an end to take quietly.
const (
	tornZeros   = 64 << 10
	sectorZeros = 512
	tornSpan    = 2 * appender.DefaultMaxWrite
)

// dataEnds reports whether the written data ends within tornSpan bytes
// of off: a run of tornZeros zeros, or zeros to the end of the file
// (sectorZeros of them, or everything from off).
func (s *Scanner) dataEnds(off int64) bool {
	limit := min(s.size, off+tornSpan)
	run := int64(0) // zeros in a row, up to pos
	for pos := off; pos < limit; {
		b, err := s.chunk(pos)
		if err != nil {
			return false
		}
		b = b[:min(int64(len(b)), limit-pos)]
		for _, v := range b {
			if run++; v != 0 {
				run = 0
			}
			if run >= tornZeros {
				return true
			}
		}
		pos += int64(len(b))
	}
	return limit == s.size && (run == limit-off || run >= sectorZeros)
}

// tornTail reports, for a blob at s.pos that runs past the end of the
// file, whether it ends the scan as a torn tail: over a Reader opened
// without Options.Size, checksummed or not, a blob cut short by the end
// of the file is the last one a crash tore. The Writer grows the file
// ahead of its writes, and a crash can keep a header written just below
// the old end without the growth that would have covered its payload
// (seen on ext4 and xfs by crashtest's TestBlobio).
func (s *Scanner) tornTail() bool {
	if !s.bounded {
		s.torn = true
	}
	return s.torn
}

// Torn reports whether the scan ended at a torn blob, with Err() == nil:
// over a Reader opened without Options.Size, a blob the end of the file
// cuts short, and, with Options.Checksum, a blob whose checksum fails
// where the written data ends within 1 MiB after it (64 KiB of zeros, or
// zeros to the end of the file), is the first blob a crash tore while
// it was being written, and ends the scan as the zeros after the written
// data do. The writes a crash tore may have landed their sectors in any
// order, so blobs whole or not may lie between it and the zeros: none
// of them was acknowledged by a Sync, and the scan returns none. End then
// returns its offset, where OpenAppend goes on. Anywhere else a checksum
// that fails is an error matching ErrCorrupt. A service that must tell a
// torn tail from a corrupt blob in its last MiB records its sizes
// (Writer.Synced) and reads with Options.Size, where every mismatch is an
// error.
func (s *Scanner) Torn() bool { return s.torn }

// End returns the offset just past the last blob the scan returned: once
// Scan has returned false with a nil Err, where the blobs end (the torn
// blob's offset, if Torn), and so the size OpenAppend continues from.
func (s *Scanner) End() int64 { return s.pos }
