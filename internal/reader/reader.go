// Package reader is the reader core that fileio's Reader, blobio's
// Reader and ephemeral's File share, as RocksDB's RandomAccessFileReader
// serves every table format: a file opened by a fallback policy, its
// alignment, bounded pools of aligned read buffers, reads that run as a
// plain pread while they are alone and through a queue on the process's
// shared io_uring rings while others are in flight, long reads split
// into pieces in flight together, an EIO split into sectors so that the
// error names the bad ones and the rest is read, and one read-ahead
// window (Window) for whoever scans: fileio's Sequential, blobio's
// Scanner, ephemeral's sequential readers.
//
// The faces add what is theirs: the blob format (blobio), the bytes
// still in a writer's memory (ephemeral), io.Reader and io.Seeker
// (fileio). Their errors say their package's name (Options.Name) and
// match their sentinels (Options.Closed, Invalid, Offset).
package reader

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
)

// How a Reader reads.
const (
	// Depth is the depth of a Reader's queue: the most reads of its
	// callers in the ring at once, and the most one vectored read keeps
	// in flight. fio's 4 KiB random reads on the virtio disk measured
	// here still gained from QD16 to QD64 (63,192 to 109,594 reads/s,
	// issue 13), and blobio's batches of 64 ran at 0.66-0.91x fio QD32
	// with 64 in flight against 0.62-0.72x with 32.
	Depth = 64

	// SmallRead is the size of the small read buffers, which serve every
	// read whose aligned span fits them: a 4 KiB page wherever it sits,
	// and reads up to 12 KiB.
	SmallRead = 16 << 10

	// LargeRead is the size of the large read buffers (plus one block,
	// so that a read of this size fits wherever it starts), and the
	// longest single device read a ReadAt makes: longer ones go out as
	// several of these at once. Neon's vectored reads merge up to
	// 128 KiB (vectored_blob_io.rs).
	LargeRead = 128 << 10

	// The most buffers of each size a Reader has: twice Depth small
	// ones and half of it large, so that one vectored read at full depth
	// (which takes at most half of each) leaves other callers buffers of
	// their own.
	SmallBuffers = 2 * Depth
	LargeBuffers = Depth / 2

	// preadReads is how many reads in progress run as plain preads, each
	// in its caller's thread; more join the queue. A lone caller keeps
	// the pread, which saves the queue's round trip. Measured on the
	// process's shared rings (ext4 on virtio, 2 vCPUs shared with other
	// load, reads of 4,000-byte blobs, 16 readers against an in-process
	// ring keeping 16 reads in flight as fio does, sandwiched in 250 ms
	// slices, medians of 14-16 rounds, 2026-12-02): 1 by pread and the
	// rest queued ran 0.73x and 0.48x (noisy), 4 by pread 0.71x and
	// 0.70x, all queued 0.72x and 0.73x, where 16 by pread ran
	// 0.41-0.45x: 16 threads blocked in pread cost more than one ring.
	// Alone, pread and the queue ran within 5% of each other.
	preadReads = 1

	closedBit = 1 << 62 // in Reader.state, beside the count of calls in progress
)

// Options configure Open and New.
type Options struct {
	Name   string             // the face's package, which begins every error message ("fileio")
	IO     fallback.Policy    // Open: the I/O path; default Auto
	Faults direct.Injector    // Open: failures planted under the file (a faults.Plan), for tests
	Size   int64              // Open: the logical size to read up to; 0: the file's size
	Slow   *direct.SlowPolicy // Open: report the file's reads in flight past a threshold (see direct.Meter)

	// The face's sentinels: Closed for calls after Close, Invalid for a
	// Size past the file's end, Offset for a negative offset.
	Closed, Invalid, Offset error

	// Small and Large, when set, are where the read buffers come from
	// (SmallRead and LargeRead plus a block, aligned to the file's
	// memory alignment): a pool shared by many Readers, so that their
	// read memory is one budget. nil: pools of the Reader's own, of
	// SmallBuffers and LargeBuffers, freed by Close.
	Small, Large *Pool
}

// A Reader reads a file at any offset and length. It is safe for
// concurrent use and holds no lock across a device read: each read rounds
// its range out to the file's alignment, reads that into an aligned
// buffer from a bounded pool and copies the asked bytes out.
type Reader struct {
	f        fallback.File
	path     string
	name     string
	size     int64 // the logical size: Options.Size, or the file's size (New: the caller's)
	bounded  bool  // Options.Size was given
	align    int64 // offset alignment
	block    int64 // a multiple of both alignments
	memAl    int
	uring    bool
	own      bool // the pools are the Reader's, freed by Close
	closed   error
	offsetEr error

	meter *direct.Meter // Open's: the file's counts and the callers' asks; nil after New

	small *Pool // SmallRead bytes
	large *Pool // LargeRead plus a block
	busy  atomic.Int32

	state     atomic.Int64 // calls in progress, and closedBit
	drained   chan struct{}
	drainOnce sync.Once

	qmu sync.Mutex
	q   atomic.Pointer[queueRef]

	mu      sync.Mutex
	windows map[any]func() // what Close closes first (Track); nil once closed
}

// queueRef holds the Reader's queue, or nil when the file could not give
// one (reads then use pread alone).
type queueRef struct{ q direct.Queue }

// Open opens the file at path for reading by o.IO.
//
// With o.Size > 0 the Reader reads the file as if it were o.Size bytes
// long, the logical size a service recorded from its writer's Synced. A
// Size beyond the file's end means bytes the service counted on are
// gone: Open fails with an error matching both o.Invalid and
// io.ErrUnexpectedEOF.
func Open(path string, o Options) (*Reader, error) {
	m, err := direct.NewMeter(&direct.MeterOptions{Slow: o.Slow})
	if err != nil {
		return nil, fmt.Errorf("%w: Slow: %w", o.Invalid, err)
	}
	f, err := fallback.Open(path, os.O_RDONLY, 0, o.IO)
	if err != nil {
		m.Close()
		return nil, err
	}
	if o.Faults != nil {
		f = fallback.WithFaults(f, o.Faults)
	}
	f = fallback.WithMeter(f, m)
	ok := false
	defer func() {
		if !ok {
			m.Close()
		}
	}()
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.IsDir() {
		f.Close()
		return nil, &os.PathError{Op: "open", Path: path, Err: errors.New("is a directory")}
	}
	size := st.Size()
	if o.Size > 0 {
		if o.Size > size {
			f.Close()
			return nil, fmt.Errorf("%w: Size %d is past the end of %s at %d: %w", o.Invalid, o.Size, path, size, io.ErrUnexpectedEOF)
		}
		size = o.Size
	}
	r, err := New(f, size, o)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.bounded = o.Size > 0
	r.meter, ok = m, true
	return r, nil
}

// Stats returns the counts of the file's I/O and of the bytes ReadAt's
// callers asked for (zero for a Reader New made).
func (r *Reader) Stats() direct.MeterStats { return r.meter.Stats() }

// Meter returns the Meter Open made (nil after New), for a face that
// counts its own callers' asks (blobio's blobs).
func (r *Reader) Meter() *direct.Meter { return r.meter }

// New returns a Reader over f, an open file that Close closes, reading up
// to size. Pools in o that do not fit f give an error matching o.Invalid.
func New(f fallback.File, size int64, o Options) (*Reader, error) {
	a := f.Alignment()
	block := max(a.Block(), direct.MinAlignment)
	memAl := max(a.Memory, direct.MinAlignment)
	r := &Reader{
		f:        f,
		path:     f.Name(),
		name:     o.Name,
		size:     size,
		align:    int64(a.Offset),
		block:    int64(block),
		memAl:    memAl,
		uring:    f.Mode().Engine == direct.EngineURing,
		closed:   o.Closed,
		offsetEr: o.Offset,
		small:    o.Small,
		large:    o.Large,
		drained:  make(chan struct{}),
		windows:  map[any]func(){},
	}
	switch {
	case r.small == nil && r.large == nil:
		r.own = true
		r.small = NewPool(SmallBuffers, aligned.Up(SmallRead, block), memAl)
		r.large = NewPool(LargeBuffers, aligned.Up(LargeRead, block)+block, memAl)
	case r.small == nil || r.large == nil:
		return nil, fmt.Errorf("%w: a shared Small pool and no Large one, or the reverse", o.Invalid)
	}
	for _, p := range []*Pool{r.small, r.large} {
		if p.Size()%block != 0 || p.Align()%memAl != 0 {
			return nil, fmt.Errorf("%w: a pool of %d-byte buffers aligned to %d does not fit a file of alignment %v", o.Invalid, p.Size(), p.Align(), a)
		}
	}
	if r.large.Size() < r.small.Size() {
		return nil, fmt.Errorf("%w: the Large pool's buffers are smaller than the Small one's", o.Invalid)
	}
	return r, nil
}

// File returns the file the Reader reads.
func (r *Reader) File() fallback.File { return r.f }

// Path returns the name the file was opened with.
func (r *Reader) Path() string { return r.path }

// Size returns the size the Reader reads up to.
func (r *Reader) Size() int64 { return r.size }

// Bounded reports whether Options.Size set the size.
func (r *Reader) Bounded() bool { return r.bounded }

// Align returns the file's offset alignment; Block a multiple of both
// alignments, at least direct.MinAlignment; MemAlign the memory
// alignment of its buffers.
func (r *Reader) Align() int64  { return r.align }
func (r *Reader) Block() int64  { return r.block }
func (r *Reader) MemAlign() int { return r.memAl }

// URing reports whether the file's queues run on io_uring.
func (r *Reader) URing() bool { return r.uring }

// Small and Large return the pools of small and large read buffers.
func (r *Reader) Small() *Pool { return r.small }
func (r *Reader) Large() *Pool { return r.large }

// PoolFor returns the pool whose buffers fit a read of n bytes: small or
// large.
func (r *Reader) PoolFor(n int64) *Pool {
	if n <= int64(r.small.Size()) {
		return r.small
	}
	return r.large
}

// AddBusy counts n more device reads in progress (a vectored read's,
// staged beside the Reader's own), so that Read sends the others to the
// queue meanwhile; -n when they are done.
func (r *Reader) AddBusy(n int32) { r.busy.Add(n) }

// Busy returns the device reads in progress.
func (r *Reader) Busy() int32 { return r.busy.Load() }

// errorf returns an error naming the face's package: "fileio: " + format.
func (r *Reader) errorf(format string, args ...any) error {
	return fmt.Errorf(r.name+": "+format, args...)
}

// Acquire counts a call in progress, or fails with Options.Closed once
// the Reader is closed. Each Acquire that succeeds is followed by one
// Release.
func (r *Reader) Acquire() error {
	if r.state.Add(1)&closedBit != 0 {
		r.Release()
		return r.closed
	}
	return nil
}

// Release ends a call; the last one after Close lets Close go on.
func (r *Reader) Release() {
	if r.state.Add(-1) == closedBit {
		r.drainOnce.Do(func() { close(r.drained) })
	}
}

// Track has Close call closeFn for key (a Sequential, a Scanner) before
// it closes the file, unless Untrack(key) came first. It fails with
// Options.Closed once the Reader is closed.
func (r *Reader) Track(key any, closeFn func()) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.windows == nil {
		return r.closed
	}
	r.windows[key] = closeFn
	return nil
}

// Untrack forgets key.
func (r *Reader) Untrack(key any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.windows != nil {
		delete(r.windows, key)
	}
}

// Read reads into p at off, aligned. With more than preadReads reads in
// progress on an io_uring file it goes through the queue, so that they
// are all in the ring at once; else, and always on the pwrite engine
// (whose queue would only hand the same pread to a worker), it is a
// plain pread in the caller's thread. done receives the queued
// completion. A read that fails with EIO is read again sector by sector
// (SplitEIO). A read cut short by the end of the file returns the bytes
// it got and no error.
func (r *Reader) Read(done chan direct.Completion, p []byte, off int64) (int, error) {
	few := r.busy.Add(1) <= preadReads
	defer r.busy.Add(-1)
	if r.uring && !few {
		if q := r.Queue(); q != nil {
			if err := q.Submit(direct.Request{Op: direct.OpRead, Buf: p, Off: off, Done: done}); err != nil {
				return 0, err
			}
			c := q.Await(done)
			return r.SplitEIO(p, off, c.N, c.Err)
		}
	}
	return EndOK(r.f.ReadAt(p, off))
}

// SplitEIO returns the result of a queued read of p at off, (n, err),
// without the io.EOF of a read cut short by the end of the file. A read
// that failed with EIO is read again sector by sector (direct.File.ReadAt
// does that; a queued read does not), so that an EIO that passes costs
// nothing and a latent sector error leaves the bytes before the bad
// sectors and an error naming them (a *direct.SectorError).
func (r *Reader) SplitEIO(p []byte, off int64, n int, err error) (int, error) {
	if UnsplitEIO(err) {
		return EndOK(r.f.ReadAt(p, off))
	}
	return EndOK(n, err)
}

// Queue returns the Reader's queue, set up on first use, or nil if the
// file cannot give one.
func (r *Reader) Queue() direct.Queue {
	if ref := r.q.Load(); ref != nil {
		return ref.q
	}
	r.qmu.Lock()
	defer r.qmu.Unlock()
	if ref := r.q.Load(); ref != nil {
		return ref.q
	}
	q, err := r.f.NewQueue(&direct.QueueOptions{Depth: Depth})
	if err != nil {
		q = nil
	}
	r.q.Store(&queueRef{q})
	return q
}

// SetQueue replaces the Reader's queue, for tests that count what goes
// into it.
func (r *Reader) SetQueue(q direct.Queue) { r.q.Store(&queueRef{q}) }

// Close waits for the calls in progress, closes what Track asked it to,
// then the queue and the file, and frees the pools that are the
// Reader's own. Later calls fail with Options.Closed, as a second Close
// does.
func (r *Reader) Close() error {
	old := r.state.Or(closedBit)
	if old&closedBit != 0 {
		return r.closed
	}
	if old != 0 {
		<-r.drained
	}
	r.mu.Lock()
	windows := r.windows
	r.windows = nil
	r.mu.Unlock()
	for _, closeFn := range windows {
		closeFn()
	}
	if ref := r.q.Load(); ref != nil && ref.q != nil {
		ref.q.Close()
	}
	if r.own {
		r.small.Close()
		r.large.Close()
	}
	r.meter.Close()
	return r.f.Close()
}
