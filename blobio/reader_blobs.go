package blobio

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

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
	v := &vectored{r: r, offs: offs, fn: fn}
	v.plan()
	return v.run()
}

// vectored is one ReadBlobs call.
type vectored struct {
	r     *Reader
	offs  []int64
	fn    func(int, []byte) error
	order []int // indices of offs, by offset
	reads []mergedRead
	q     direct.Queue     // nil: reads run as goroutines calling ReadAt
	batch []direct.Request // reads staged for q, submitted together
	done  chan direct.Completion
	out   []byte // a decoded blob
}

// A mergedRead is one aligned read, [lo, hi), that serves the offsets
// order[first:last].
type mergedRead struct {
	lo, hi      int64
	first, last int
	b           *reader.Buf
}

// plan sorts the offsets and merges neighbours into reads. A blob ends by
// the next offset (blobs do not overlap); the last of a read is assumed as
// long as the Reader's recent blobs, and read in full later if it is not.
func (v *vectored) plan() {
	r, c := v.r, v.r.c
	v.order = make([]int, len(v.offs))
	for i := range v.order {
		v.order[i] = i
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

// run keeps up to ReadDepth reads in flight and hands out their blobs as
// they complete.
func (v *vectored) run() error {
	c := v.r.c
	if c.URing() {
		v.q = c.Queue()
	}
	// On the pwrite engine each read is a goroutine calling ReadAt: a
	// pwrite queue would keep ReadDepth workers alive per Reader for as
	// long as it is open, for 0.9-1.9x (median 1.15x) of the reads/s of
	// batches of 64 measured here side by side.
	v.done = make(chan direct.Completion, ReadDepth)
	next, inflight, large := 0, 0, 0 // large: large buffers held
	var cur direct.Completion        // the read being delivered, if holding
	holding := false
	defer func() {
		// On an error, and if fn panics: the kernel and the goroutines
		// must be done with the buffers before they go back.
		if holding {
			v.finish(cur)
		}
		for ; inflight > 0; inflight-- {
			v.finish(v.await())
		}
	}()
	// Reads are staged as their buffers come and go to the queue together,
	// with one io_uring_enter (direct.SubmitBatch); flush submits what is
	// staged and gives back the buffers of reads it could not submit.
	first := 0
	flush := func() error {
		k, err := v.flush(first, next)
		if err != nil {
			for j := first + k; j < next; j++ {
				if c.PoolFor(v.reads[j].hi-v.reads[j].lo) == c.Large() {
					large--
				}
				v.unstage(j)
				inflight--
			}
			return v.fail(first+k, err)
		}
		return nil
	}
	for {
		first = next
		for next < len(v.reads) && inflight < ReadDepth {
			m := &v.reads[next]
			pool := c.PoolFor(m.hi - m.lo)
			if pool == c.Large() && large >= reader.LargeBuffers/2 && inflight > 0 {
				break // half the large buffers are ours: wait for one
			}
			var err error
			if inflight == 0 {
				m.b, err = pool.Get()
			} else if m.b, err = pool.TryGet(); m.b == nil && err == nil {
				break // the others' buffers come back as they complete
			}
			if err != nil {
				if ferr := flush(); ferr != nil {
					return ferr
				}
				return v.fail(next, err)
			}
			v.stage(next)
			if pool == c.Large() {
				large++
			}
			next++
			inflight++
		}
		if err := flush(); err != nil {
			return err
		}
		if inflight == 0 {
			return nil
		}
		cur = v.await()
		if cur.Token >= uint64(len(v.reads)) || v.reads[cur.Token].b == nil {
			// Not a read of ours in flight: the queue broke and made it
			// up. Wait for nothing more; its buffers stay out of the pool.
			inflight = 0
			return v.fail(0, fmt.Errorf("blobio: read queue failed: %w", cur.Err))
		}
		holding = true
		inflight--
		if m := &v.reads[cur.Token]; c.PoolFor(m.hi-m.lo) == c.Large() {
			large--
		}
		err := v.deliver(cur)
		v.finish(cur)
		holding = false
		if err != nil {
			return err
		}
	}
}

// stage readies read k: on a queue it joins the batch flush submits; on
// the pwrite engine it starts at once, as a goroutine calling ReadAt.
func (v *vectored) stage(k int) {
	m := &v.reads[k]
	p := m.b.Buf.Bytes()[:m.hi-m.lo]
	v.r.c.AddBusy(1)
	if v.q != nil {
		v.batch = append(v.batch, direct.Request{Op: direct.OpRead, Buf: p, Off: m.lo, Token: uint64(k), Done: v.done})
		return
	}
	go func() {
		n, err := v.r.c.File().ReadAt(p, m.lo)
		v.done <- direct.Completion{Token: uint64(k), Op: direct.OpRead, N: n, Err: err}
	}()
}

// flush submits the reads staged since read first, up to next, and
// returns how many of them the queue accepted.
func (v *vectored) flush(first, next int) (int, error) {
	if v.q == nil || len(v.batch) == 0 {
		return next - first, nil
	}
	k, err := direct.SubmitBatch(v.q, v.batch)
	clear(v.batch) // drop the buffers' references
	v.batch = v.batch[:0]
	return k, err
}

// unstage gives back the buffer of read k, staged and not submitted.
func (v *vectored) unstage(k int) {
	m := &v.reads[k]
	v.r.c.AddBusy(-1)
	v.r.c.PoolFor(m.hi - m.lo).Put(m.b)
	m.b = nil
}

func (v *vectored) await() direct.Completion {
	if v.q != nil {
		return v.q.Await(v.done)
	}
	return <-v.done
}

// finish returns the buffer of the read c completes.
func (v *vectored) finish(c direct.Completion) {
	v.r.c.AddBusy(-1)
	m := &v.reads[c.Token]
	v.r.c.PoolFor(m.hi - m.lo).Put(m.b)
	m.b = nil
}

// fail names read k's first offset in err.
func (v *vectored) fail(k int, err error) error {
	i := v.order[v.reads[k].first]
	return &BlobError{i, v.offs[i], err}
}

// deliver calls fn for every offset the read c completes.
func (v *vectored) deliver(c direct.Completion) error {
	r := v.r
	m := &v.reads[c.Token]
	// A latent sector error: the range is read again sector by sector,
	// so that only the offsets the bad sectors concern fail.
	n, err := r.c.SplitEIO(m.b.Buf.Bytes()[:m.hi-m.lo], m.lo, c.N, c.Err)
	var bad []*direct.SectorError
	if reader.BadSectors(err) {
		// Every byte of the range but the bad runs was read.
		bad, n, err = sectorRuns(err), int(m.hi-m.lo), nil
	}
	if err != nil {
		return v.fail(int(c.Token), err)
	}
	valid := r.valid(m.lo, n)
	for _, i := range v.order[m.first:m.last] {
		off := v.offs[i]
		if se := r.blobHits(m.b.Buf.Bytes()[:valid], m.lo, off, bad); se != nil {
			return &BlobError{i, off, se}
		}
		payload, comp, big, err := r.blobIn(m.b, m.lo, valid, off)
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
