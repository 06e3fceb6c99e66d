package reader

import (
	"io"

	"github.com/dio-storage/dio/aligned"
)

// ManyDepth is how many reads of LargeRead one long ReadAt keeps in
// flight: 1 MiB at a time, as a sequential O_DIRECT reader at QD4-8 of
// 128-256 KiB reaches a disk's streaming rate.
const ManyDepth = 8

// readMany reads want at off, longer than a large buffer, in pieces of a
// large buffer each, up to ManyDepth in flight (ReadSpans: the first
// ones in one batch), copying each where it goes as it completes. The
// bytes before the first piece that fails (those before its bad sectors
// included) or ends short are the result, with its error; no piece past
// it starts.
func (r *Reader) readMany(want []byte, off int64) (int, error) {
	lo := aligned.Down(off, r.align)
	end := aligned.Up(off+int64(len(want)), r.align)
	step := aligned.Down(int64(r.large.Size()), r.align)
	pieces := int((end - lo + step - 1) / step)
	bad, n := pieces, len(want) // the first piece that failed, and the bytes before its end
	var badErr error
	piece := func(k int) (int64, int64, bool) {
		a := lo + int64(k)*step
		return a, min(a+step, end), k < bad
	}
	r.ReadSpans(pieces, SpanOptions{Depth: ManyDepth, NoWait: true}, piece, func(k int, b *Buf, m int, err error) error {
		a, z, _ := piece(k)
		from, to := max(a, off), min(z, off+int64(len(want)))
		got := a + int64(m)
		if b != nil && got > from {
			copy(want[from-off:], b.Buf.Bytes()[from-a:min(got, to)-a])
		}
		if err == nil && got < to {
			err = io.ErrUnexpectedEOF // a bound past the file's end
		}
		if err != nil && k < bad {
			bad, n, badErr = k, int(max(min(got, to), from)-off), err
			if err == io.ErrUnexpectedEOF {
				badErr = r.errorf("reading %s at %d: file ends at %d: %w", r.path, max(got, from), got, err)
			} else {
				badErr = r.errorf("reading %s at %d: %w", r.path, off+int64(n), err)
			}
		}
		return nil // every piece in flight is copied: n is the bytes before bad
	})
	return n, badErr
}
