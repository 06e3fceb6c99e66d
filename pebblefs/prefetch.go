//go:build unix

package pebblefs

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"github.com/dio-storage/dio/aligned"
)

var errPrefetchClosed = errors.New("pebblefs: file closed before its prefetch read")

// maxPrefetch is the longest Prefetch pebblefs reads ahead: Pebble's
// iterators ask for 64 KiB growing to 256 KiB (objstorageprovider's
// fileMaxReadaheadSize), then switch to a SequentialReadsOption handle.
const maxPrefetch = 256 << 10

// prefetch is one asynchronous read ahead of an iterator: Prefetch
// starts it, and a ReadAt inside its range waits for it and copies from
// it instead of reading the device. Its buffer comes from the read-ahead
// half of Options.Memory (aheadBudget.prefetchBuffer) and goes back when
// the last of its references does: the prefetcher's, dropped when a read
// passes its end, the next Prefetch replaces it, the file closes or the
// budget takes it back for a newer one or for a sequential file; its
// read's, when the read is done; and each ReadAt's copying from it.
type prefetch struct {
	off   int64 // where the read starts: Prefetch's off, aligned down
	b     *aligned.Buffer
	buf   []byte // b's bytes read into: the aligned span around what was asked
	n     int
	err   error
	done  chan struct{} // closed when the read is done
	freed chan struct{} // closed when the buffer went back
	refs  atomic.Int32
	ahead *aheadBudget
}

// unref drops a reference, the last giving the buffer back.
func (p *prefetch) unref() {
	if p.refs.Add(-1) == 0 {
		p.ahead.shelve(p.b)
		close(p.freed)
	}
}

// prefetcher is a readFile's prefetch, at most one at a time.
type prefetcher struct {
	mu     sync.Mutex
	p      *prefetch
	active atomic.Bool  // p != nil: a read without a prefetch takes no lock
	ahead  *aheadBudget // where p's memory comes from, once a Prefetch ran
}

// Prefetch starts reading n bytes at off into memory, so that the
// ReadAt Pebble makes there next finds them on their way: its iterators
// call it on a file they read in order (64 KiB growing to 256 KiB ahead)
// before they move to a handle opened with vfs.SequentialReadsOption.
// It does nothing for a file served from fresh memory, a range already
// being read ahead, or when the read-ahead budget is spent.
func (f *readFile) Prefetch(off, n int64) error {
	if ff := f.fresh.Load(); ff != nil && !ff.gone() || f.closed.Load() || f.live.Load() != nil || n <= 0 {
		return nil
	}
	n = min(n, maxPrefetch)
	f.mu.RLock()
	size := f.size
	f.mu.RUnlock()
	if off >= size {
		return nil
	}
	n = min(n, size-off)
	f.pre.mu.Lock()
	defer f.pre.mu.Unlock()
	if p := f.pre.p; p != nil && p.off <= off && off+n <= p.off+int64(len(p.buf)) {
		return nil
	}
	f.pre.dropLocked()
	f.pre.ahead = &f.fs.ahead
	b := f.fs.ahead.prefetchBuffer(&f.pre, n)
	if b == nil {
		return nil
	}
	// The aligned span around [off, off+n), read straight into b.
	lo, hi := aligned.Down(off, poolAlign), aligned.Up(off+n, poolAlign)
	p := &prefetch{off: lo, b: b, buf: b.Bytes()[:hi-lo], done: make(chan struct{}), freed: make(chan struct{}), ahead: &f.fs.ahead}
	p.refs.Store(2) // the prefetcher's and the read's
	f.pre.p = p
	f.pre.active.Store(true)
	go func() {
		defer p.unref()
		defer close(p.done)
		f.mu.RLock()
		defer f.mu.RUnlock()
		if f.r == nil || f.closed.Load() {
			p.err = errPrefetchClosed
			return
		}
		p.n, p.err = f.r.ReadAtBuffer(p.b, len(p.buf), p.off)
		if p.err == io.EOF { // the span's aligned end is past the file's
			p.err = nil
		}
	}()
	return nil
}

// fromPrefetch copies len(p) bytes at off from the prefetch when it
// holds them all, waiting for its read; false when it does not (the
// caller reads the device). A read that reaches past the prefetch's end
// releases it: the iterator has moved on.
func (f *readFile) fromPrefetch(p []byte, off int64) bool {
	if !f.pre.active.Load() {
		return false
	}
	f.pre.mu.Lock()
	pf := f.pre.p
	if pf == nil {
		f.pre.mu.Unlock()
		return false
	}
	end := off + int64(len(p))
	if off < pf.off || end > pf.off+int64(len(pf.buf)) {
		if end > pf.off+int64(len(pf.buf)) && off < pf.off+int64(len(pf.buf)) {
			f.pre.dropLocked()
		}
		f.pre.mu.Unlock()
		return false
	}
	pf.refs.Add(1) // its buffer stays while this copies from it
	f.pre.mu.Unlock()
	defer pf.unref()
	<-pf.done
	if pf.err != nil || int64(pf.n) < end-pf.off {
		return false
	}
	copy(p, pf.buf[off-pf.off:])
	return true
}

// dropLocked forgets the prefetch, whose buffer goes back once its read
// and the copies from it are done. pre.mu is held.
func (pr *prefetcher) dropLocked() {
	p := pr.p
	if p == nil {
		return
	}
	pr.p = nil
	pr.active.Store(false)
	if pr.ahead != nil {
		pr.ahead.forget(pr)
	}
	p.unref()
}

// takeBack drops the prefetch, unread, and waits for its buffer to go
// back before it returns: the budget needs it for a sequential file.
func (pr *prefetcher) takeBack() {
	pr.mu.Lock()
	p := pr.p
	pr.dropLocked()
	pr.mu.Unlock()
	if p != nil {
		<-p.freed
	}
}

// tryTakeBack drops the prefetch, unread, unless its file is busy with
// it: a newer Prefetch needs the memory, and must not wait for a lock
// another file's Prefetch may hold while it waits for this one's.
func (pr *prefetcher) tryTakeBack() {
	if !pr.mu.TryLock() {
		return
	}
	pr.dropLocked()
	pr.mu.Unlock()
}

// close drops the prefetch and waits for its read.
func (pr *prefetcher) close() {
	pr.mu.Lock()
	p := pr.p
	pr.dropLocked()
	pr.mu.Unlock()
	if p != nil {
		<-p.done
	}
}
