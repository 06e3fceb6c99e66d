package fileio

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
	"github.com/dio-storage/dio/internal/readbuf"
)

// How a Reader reads.
const (
	// ReadDepth is the depth of a Reader's queue: the most reads of its
	// callers in the ring at once. fio's 4 KiB random reads on the virtio
	// disk measured here still gained from QD16 to QD64 (63,192 to
	// 109,594 reads/s, issue 13).
	ReadDepth = 64

	// smallRead is the size of a Reader's small read buffers, which serve
	// every read whose aligned span fits them: a 4 KiB page wherever it
	// sits, and reads up to 12 KiB.
	smallRead = 16 << 10

	// largeRead is the size of the large read buffers, and the longest
	// single device read a ReadAt makes: longer ones go out as several of
	// these at once. Neon's vectored reads merge up to 128 KiB.
	largeRead = 128 << 10

	// The most buffers of each size a Reader keeps: enough for ReadDepth
	// small reads, and a quarter of that large.
	smallBuffers = 2 * ReadDepth
	largeBuffers = ReadDepth / 2

	// preadReads is how many reads in progress run as plain preads, each
	// in its caller's thread; more join the queue. A lone caller keeps the
	// pread, which saves the queue's round trip; 16 threads blocked in
	// pread cost more than one ring (blobio's measurement, 2026-12-02:
	// 16 readers ran 0.41-0.45x fio QD16 by pread, 0.72x queued).
	preadReads = 1

	closedBit = 1 << 62 // in Reader.state, beside the count of calls in progress
)

// A Reader reads a file at any offset and length. It is safe for
// concurrent use and holds no lock across a device read: each read rounds
// its range out to the file's alignment, reads that into an aligned
// buffer from a bounded pool and copies the asked bytes out (RocksDB's
// RandomAccessFileReader does the same). A read runs as a plain pread in
// its caller's thread while no other is in progress, and on an io_uring
// file, while others are, in the Reader's queue on the process's shared
// rings, where they are in flight together without a thread each.
//
// Memory: a read whose aligned span fits 16 KiB takes one of at most 128
// small buffers (2 MiB), a larger one one of at most 32 buffers of 128
// KiB plus a block (4.1 MiB with 4 KiB blocks), allocated as reads need
// them and freed by Close; a read that finds every buffer in use gets one
// for itself, freed when it returns, rather than wait. With
// Options.Pool, reads take the Pool's buffers instead and give them back
// as they return, so that a thousand open Readers hold no memory between
// reads (an idle Reader holds at least a small and a large buffer of its
// own otherwise, 148 KiB).
//
// A sequential reader (a compaction, a scan, a log replay) takes a
// Sequential (NewSequential), which reads ahead; random readers never pay
// for it.
type Reader struct {
	f         fallback.File
	path      string
	size      int64 // the logical size: Options.Size, or the file's size
	bounded   bool  // Options.Size was given
	align     int64 // offset alignment
	block     int64 // a multiple of both alignments
	memAl     int
	readAhead int
	uring     bool

	small *readbuf.Pool // smallRead bytes
	large *readbuf.Pool // largeRead plus a block
	busy  atomic.Int32

	state     atomic.Int64 // calls in progress, and closedBit
	drained   chan struct{}
	drainOnce sync.Once

	qmu sync.Mutex
	q   atomic.Pointer[queueRef]

	mu   sync.Mutex
	seqs map[*Sequential]struct{} // nil once closed
}

// queueRef holds the Reader's queue, or nil when the file could not give
// one (reads then use pread alone).
type queueRef struct{ q direct.Queue }

// Open opens the file at path for reading.
//
// With o.Size > 0 the Reader reads the file as if it were o.Size bytes
// long, the logical size a service recorded from Writer.Synced: Size
// reports it, and reads end there with io.EOF. A Size beyond the file's
// end means bytes the service counted on are gone: Open fails with an
// error matching both ErrInvalidOptions and io.ErrUnexpectedEOF. Options
// it refuses give an error matching ErrInvalidOptions.
func Open(path string, o *Options) (*Reader, error) {
	opts := o.get()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	f, err := open(path, os.O_RDONLY, 0, opts)
	if err != nil {
		return nil, err
	}
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
	if opts.Size > 0 {
		if opts.Size > size {
			f.Close()
			return nil, fmt.Errorf("%w: Size %d is past the end of %s at %d: %w", ErrInvalidOptions, opts.Size, path, size, io.ErrUnexpectedEOF)
		}
		size = opts.Size
	}
	a := f.Alignment()
	block := max(a.Block(), direct.MinAlignment)
	memAl := max(a.Memory, direct.MinAlignment)
	ra := opts.ReadAhead
	if ra == 0 {
		ra = DefaultReadAhead
	}
	small := readbuf.New(smallBuffers, aligned.Up(smallRead, block), memAl)
	large := readbuf.New(largeBuffers, aligned.Up(largeRead, block)+block, memAl)
	if p := opts.Pool; p != nil {
		if p.Align()%memAl != 0 || p.BufferSize()%block != 0 {
			f.Close()
			return nil, fmt.Errorf("%w: the Pool's %d-byte buffers aligned to %d do not fit %s (alignment %v)", ErrInvalidOptions, p.BufferSize(), p.Align(), path, a)
		}
		small = readbuf.NewShared(p)
		large = small
	}
	return &Reader{
		f:         f,
		path:      path,
		size:      size,
		bounded:   opts.Size > 0,
		align:     int64(a.Offset),
		block:     int64(block),
		memAl:     memAl,
		readAhead: aligned.Up(ra, block),
		uring:     f.Mode().Engine == direct.EngineURing,
		small:     small,
		large:     large,
		drained:   make(chan struct{}),
		seqs:      map[*Sequential]struct{}{},
	}, nil
}

// Size returns the size the Reader reads up to: Options.Size, or the size
// of the file when it was opened.
func (r *Reader) Size() int64 { return r.size }

// Mode reports the I/O path the Reader uses.
func (r *Reader) Mode() fallback.Mode { return r.f.Mode() }

// Fd returns the file's descriptor, for advice to the kernel
// (posix_fadvise, fstat) and nothing else. It is valid until Close, and
// another file may get the number after it.
func (r *Reader) Fd() uintptr { return r.f.Fd() }

// acquire counts a call in progress, or fails once the Reader is closed.
func (r *Reader) acquire() error {
	if r.state.Add(1)&closedBit != 0 {
		r.release()
		return ErrClosed
	}
	return nil
}

// release ends a call; the last one after Close lets Close go on.
func (r *Reader) release() {
	if r.state.Add(-1) == closedBit {
		r.drainOnce.Do(func() { close(r.drained) })
	}
}

// ReadAt reads len(p) bytes at off, as io.ReaderAt and os.File do: a
// read that Size cuts short returns the bytes there are and io.EOF (one
// that ends exactly at Size, nil), a negative off an error matching
// ErrOffset. Any offset and length: the range is read rounded
// out to the file's alignment, in reads of up to 128 KiB, several in
// flight at once for a long p. It is safe for concurrent use.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	if err := r.acquire(); err != nil {
		return 0, err
	}
	defer r.release()
	return r.readAt(p, off)
}

func (r *Reader) readAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%w: ReadAt at negative offset %d", ErrOffset, off)
	}
	if off >= r.size {
		if len(p) == 0 && off == r.size {
			return 0, nil
		}
		return 0, io.EOF
	}
	want, atEnd := p, false
	if rest := r.size - off; int64(len(p)) > rest {
		want, atEnd = p[:rest], true
	}
	lo := aligned.Down(off, r.align)
	hi := aligned.Up(off+int64(len(want)), r.align)
	var n int
	var err error
	if span := hi - lo; span <= int64(r.small.Size()) {
		n, err = r.readVia(r.small, want, off)
	} else if span <= int64(r.large.Size()) || !r.uring {
		n, err = r.readVia(r.large, want, off)
	} else {
		n, err = r.readMany(want, off)
	}
	if err == nil && atEnd {
		err = io.EOF
	}
	return n, err
}

// readVia reads want at off through one buffer of pool, in turns of the
// buffer's size.
func (r *Reader) readVia(pool *readbuf.Pool, want []byte, off int64) (int, error) {
	b, err := pool.GetAny()
	if err != nil {
		return 0, err
	}
	defer pool.Put(b)
	buf := b.Buf.Bytes()
	span := aligned.Down(int64(len(buf)), r.align) // whole aligned reads per turn
	n := 0
	for n < len(want) {
		pos := off + int64(n)
		lo := aligned.Down(pos, r.align)
		hi := min(aligned.Up(off+int64(len(want)), r.align), lo+span)
		m, err := r.read(b.Done, buf[:hi-lo], lo)
		if err != nil {
			if int64(m) > pos-lo { // the bytes before bad sectors (direct.SectorError)
				n += copy(want[n:], buf[pos-lo:m])
			}
			return n, fmt.Errorf("fileio: reading %s at %d: %w", r.path, pos, err)
		}
		if lo+int64(m) <= pos {
			// Shorter than Size: a bound past the file's end.
			return n, fmt.Errorf("fileio: reading %s at %d: file ends at %d: %w", r.path, pos, lo+int64(m), io.ErrUnexpectedEOF)
		}
		n += copy(want[n:], buf[pos-lo:m])
	}
	return n, nil
}

// read reads into p at off. With more than preadReads reads in progress
// on an io_uring file it goes through the queue, so that they are all in
// the ring at once; else, and always on the pwrite engine (whose queue
// would only hand the same pread to a worker), it is a plain pread in the
// caller's thread. done receives the queued completion. A read cut short
// by the end of the file returns the bytes it got and no error.
func (r *Reader) read(done chan direct.Completion, p []byte, off int64) (int, error) {
	few := r.busy.Add(1) <= preadReads
	defer r.busy.Add(-1)
	if r.uring && !few {
		if q := r.queue(); q != nil {
			if err := q.Submit(direct.Request{Op: direct.OpRead, Buf: p, Off: off, Done: done}); err != nil {
				return 0, err
			}
			c := q.Await(done)
			if readbuf.UnsplitEIO(c.Err) {
				// A latent sector error: ReadAt reads the range again
				// sector by sector, keeping what can be read.
				return readbuf.EndOK(r.f.ReadAt(p, off))
			}
			return readbuf.EndOK(c.N, c.Err)
		}
	}
	return readbuf.EndOK(r.f.ReadAt(p, off))
}

// queue returns the Reader's queue, set up on first use, or nil if the
// file cannot give one.
func (r *Reader) queue() direct.Queue {
	if ref := r.q.Load(); ref != nil {
		return ref.q
	}
	r.qmu.Lock()
	defer r.qmu.Unlock()
	if ref := r.q.Load(); ref != nil {
		return ref.q
	}
	q, err := r.f.NewQueue(&direct.QueueOptions{Depth: ReadDepth})
	if err != nil {
		q = nil
	}
	r.q.Store(&queueRef{q})
	return q
}

// Close waits for the reads in progress, closes the Reader's Sequentials
// and its file, and makes later calls fail with ErrClosed.
func (r *Reader) Close() error {
	old := r.state.Or(closedBit)
	if old&closedBit != 0 {
		return ErrClosed
	}
	if old != 0 {
		<-r.drained
	}
	r.mu.Lock()
	seqs := r.seqs
	r.seqs = nil
	r.mu.Unlock()
	for s := range seqs {
		s.closeByReader()
	}
	if ref := r.q.Load(); ref != nil && ref.q != nil {
		ref.q.Close()
	}
	r.small.Close()
	r.large.Close()
	return r.f.Close()
}
