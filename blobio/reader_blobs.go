package blobio

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/internal/reader"
)

// A BlobError reports the blob a ReadBlobs call failed on: a read, a bad
// offset or header, or fn's own error. errors.Is and errors.As see through
// it to Err (ErrOffset, ErrCorrupt, io.ErrUnexpectedEOF, fn's error).
type BlobError struct {
	Index  int   // the blob's index in offs
	Offset int64 // offs[Index]
	Err    error
}

func (e *BlobError) Error() string {
	return fmt.Sprintf("blobio: blob %d at %d: %v", e.Index, e.Offset, e.Err)
}

func (e *BlobError) Unwrap() error { return e.Err }

// ReadBlobs reads the blobs at offs and calls fn once per offset, from the
// calling goroutine, with the offset's index in offs and the blob, which is
// valid only during the call. The offsets may come in any order and repeat.
// Neighbours are merged into one aligned read of up to MergeSize, unless
// more than 16 KiB they do not need lie between them; up to ReadDepth
// reads are in flight at once, and fn is called as they complete, so the
// order of the calls is unspecified. A blob longer than its read, or
// compressed, or longer than MergeSize, is read and decoded whole before
// fn sees it.
//
// The first error stops it: an offset outside the file (checked before
// anything is read), a failed read, a corrupt header or a blob running past
// the end, or an error fn returns. ReadBlobs then waits for its reads in
// flight and returns the error as a *BlobError naming the offset and its
// index. fn must not call Close. It may call ReadBlob and ReadAt, which
// never wait for a buffer that a ReadBlobs call holds.
func (r *Reader) ReadBlobs(offs []int64, fn func(i int, blob []byte) error) error {
	if err := r.c.Acquire(); err != nil {
		return err
	}
	defer r.c.Release()
	for i, off := range offs {
		if off < 0 || off >= r.c.Size() {
			return &BlobError{i, off, fmt.Errorf("%w: offset %d, size %d", ErrOffset, off, r.c.Size())}
		}
	}
	if len(offs) == 0 {
		return nil
	}
	v := vectoreds.Get().(*vectored)
	defer v.release()
	v.r, v.offs, v.fn = r, offs, fn
	v.plan()
	err := r.c.ReadSpans(len(v.reads), reader.SpanOptions{Depth: ReadDepth}, v.span, v.deliver)
	// The blobs found, counted at once: three atomic adds for the call,
	// not for each blob (deliver runs on this goroutine).
	r.c.Meter().AskedCalls(direct.OpRead, v.asked.calls, v.asked.bytes)
	return err
}

// vectored is one ReadBlobs call, pooled with the slices it plans in, so
// that a batch of reads allocates nothing but what zstd decodes.
type vectored struct {
	r     *Reader
	offs  []int64
	fn    func(int, []byte) error
	order []int // indices of offs, by offset
	reads []mergedRead
	out   []byte // a decoded blob
	asked asked  // the blobs found so far
}

var vectoreds = sync.Pool{New: func() any { return new(vectored) }}

// maxKeptOut is the most decoding room a pooled vectored keeps.
const maxKeptOut = 1 << 20

func (v *vectored) release() {
	v.r, v.offs, v.fn, v.asked = nil, nil, nil, asked{}
	v.order, v.reads = v.order[:0], v.reads[:0]
	if cap(v.out) > maxKeptOut {
		v.out = nil
	}
	vectoreds.Put(v)
}

// A mergedRead is one aligned read, [lo, hi), that serves the offsets
// order[first:last].
type mergedRead struct {
	lo, hi      int64
	first, last int
}

// plan sorts the offsets and merges neighbours into reads. A blob ends by
// the next offset (blobs do not overlap); the last of a read is assumed as
// long as the Reader's recent blobs, and read in full later if it is not.
func (v *vectored) plan() {
	r, c := v.r, v.r.c
	for i := range v.offs {
		v.order = append(v.order, i)
	}
	slices.SortFunc(v.order, func(a, b int) int { return cmp.Compare(v.offs[a], v.offs[b]) })
	guess := r.guess.Load()
	limit := int64(c.Large().Size())
	for k := 0; k < len(v.order); {
		off := v.offs[v.order[k]]
		lo := aligned.Down(off, c.Align())
		end := off + guess
		j := k + 1
		for ; j < len(v.order); j++ {
			next := v.offs[v.order[j]]
			if next-min(end, next) > maxMergeGap {
				break
			}
			e := max(end, next+guess)
			if aligned.Up(e, c.Align())-lo > limit {
				break
			}
			end = e
		}
		v.reads = append(v.reads, mergedRead{lo: lo, hi: r.readEnd(lo, end), first: k, last: j})
		k = j
	}
}

// asked tallies blobs found, as reads asked for, to count at once.
type asked struct{ calls, bytes int }

// span is ReadSpans' k-th read.
func (v *vectored) span(k int) (lo, hi int64, ok bool) { return v.reads[k].lo, v.reads[k].hi, true }

// fail names read k's first offset in err.
func (v *vectored) fail(k int, err error) error {
	i := v.order[v.reads[k].first]
	return &BlobError{i, v.offs[i], err}
}

// deliver calls fn for every offset read k serves, whose n bytes are in
// b (nil: the read never started, for err).
func (v *vectored) deliver(k int, b *reader.Buf, n int, err error) error {
	r := v.r
	m := &v.reads[k]
	var bad []*direct.SectorError
	if b != nil && reader.BadSectors(err) {
		// Every byte of the range but the bad runs was read: only the
		// offsets the bad sectors concern fail.
		bad, n, err = sectorRuns(err), int(m.hi-m.lo), nil
	}
	if err != nil {
		return v.fail(k, err)
	}
	valid := r.valid(m.lo, n)
	for _, i := range v.order[m.first:m.last] {
		off := v.offs[i]
		if se := r.blobHits(b.Buf.Bytes()[:valid], m.lo, off, bad); se != nil {
			return &BlobError{i, off, se}
		}
		payload, comp, big, err := r.blobIn(b, m.lo, valid, off, &v.asked)
		if err == nil {
			payload, err = r.checked(payload, comp)
		}
		blob := payload
		if err == nil && comp != None {
			v.out, err = r.dec.decode(payload, comp, v.out)
			blob = v.out
		}
		if err != nil {
			err = corruptAt(off, err) // fn's own errors stay as they are
		} else {
			err = v.fn(i, blob)
		}
		if big != nil {
			big.Free()
		}
		if err != nil {
			return &BlobError{i, off, err}
		}
	}
	return nil
}

// sectorRuns returns the runs of bad sectors err names.
func sectorRuns(err error) []*direct.SectorError {
	var runs []*direct.SectorError
	var se *direct.SectorError
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if errors.As(e, &se) {
				runs = append(runs, se)
			}
		}
	} else if errors.As(err, &se) {
		runs = append(runs, se)
	}
	return runs
}

// blobHits returns the run of bad sectors that the blob at off, in have
// read at lo, reaches into, or nil: its header and payload where the
// header can be decoded, else as much as the longest header.
func (r *Reader) blobHits(have []byte, lo, off int64, bad []*direct.SectorError) *direct.SectorError {
	if len(bad) == 0 || off < lo || off >= lo+int64(len(have)) {
		return nil
	}
	end := off + MaxHeaderSize
	if hs, n, _, err := DecodeHeader(have[off-lo:]); err == nil {
		end = max(off+int64(hs)+int64(n), off+1)
	}
	for _, se := range bad {
		if se.Off < end && off < se.Off+int64(se.Len) {
			return se
		}
	}
	return nil
}
