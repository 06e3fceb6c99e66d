package ephemeral

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/appender"
	"github.com/dio-storage/dio/internal/reader"
)

// Options configure Create. A nil *Options means defaults.
type Options struct {
	BufferSize int             // bytes per buffer; default 64 KiB, rounded up to the file's alignment; at most fileio.MaxBufferSize (256 MiB), else ErrInvalidOptions
	Buffers    int             // buffers per file; default with O_DIRECT: two merged 512 KiB writes, at least 4 (16 of 64 KiB); 4 through the page cache or a Pool; at most fileio.MaxBuffers, and Buffers × BufferSize bytes the system maps, else ErrInvalidOptions
	IO         fallback.Policy // default Auto

	// Pool, when set, supplies the write buffers, so that many files
	// share one memory budget: Create waits for a buffer rather than
	// exceed it. Its buffer size overrides BufferSize.
	Pool *aligned.Pool

	// Retry, when set, makes the writer retry a write or fdatasync that
	// failed with ENOSPC, EDQUOT or EIO, waiting with backoff, until the
	// policy's Context ends, telling OnRetry of each failure instead of
	// returning it (Neon's BufferedWriter does the same). nil: the call
	// returns the failure, holds on to every byte it acknowledged, and
	// the next call writes them again (see Failures in the package doc).
	Retry *RetryPolicy

	// Faults injects I/O errors into the file's engine, for tests (see
	// package faults): into its writes and its reads alike.
	Faults direct.Injector

	// Context bounds Create's wait for a spent Pool's first buffer, the
	// only wait on the Pool; a done Context fails Create with its error.
	// nil: context.Background().
	Context context.Context

	// Slow, when set, reports the file's reads, writes and fdatasyncs
	// still in flight past Slow.Threshold, with the offset and length,
	// once per operation, on a goroutine of its own, never delaying the
	// I/O (as fileio's Options.Slow). nil costs nothing. One without a
	// positive Threshold or a Report is refused with ErrInvalidOptions.
	// The file has no name: SlowIO.Name is the directory given to
	// Create (O_TMPFILE), or the name the file had before Create
	// unlinked it.
	Slow *direct.SlowPolicy
}

// Stats counts a File's work since Create: its Write and WriteBlob calls
// (a blob's header and payload in Write.Bytes) against what the device
// wrote, padded tails included, and its Flush's and Sync's fdatasyncs;
// its ReadAt and ReadBlob calls against what the device read. Reads the
// writer's buffers serve cost the device nothing, so Read.DeviceBytes may
// be less than Read.Bytes; a header and its blob are read once
// (ReadBlob asks for them together).
type Stats struct {
	Write direct.WriterStats
	Read  direct.ReaderStats
}

// Sub returns s minus prev, an earlier snapshot of the same File.
func (s Stats) Sub(prev Stats) Stats {
	return Stats{Write: s.Write.Sub(prev.Write), Read: s.Read.Sub(prev.Read)}
}

// Stats returns the File's counts; they stay readable after Close. The
// process's, by path, are direct.Stats.
func (f *File) Stats() Stats {
	s := f.meter.Stats()
	return Stats{Write: s.Writer(), Read: s.Reader()}
}

// A File is a temporary append-only file.
//
// Concurrency: all methods are safe for concurrent use. One goroutine at
// a time appends (Write, WriteBlob, Flush, Sync; others calling them wait
// their turn) while any number of goroutines read (ReadAt, ReadBlob,
// Size). The writer never waits for a reader's device read, and readers
// never wait for the writer's device write: a lock guards only what is
// where (the bytes final on disk, those in flight, the buffer being
// filled), and nobody holds it across a device wait. A read copies bytes
// still in memory while holding it, and reads the rest from the disk
// outside it, into a buffer of its own. A byte is read from the disk only
// once the write that put it there has completed, and the tail block that
// Flush writes padded, to be rewritten later, is served from memory until
// then. Close waits for the reads in progress and makes every later call
// fail with ErrClosed.
//
// Close is owed: a File dropped without it is released by a cleanup when
// the garbage collector finds it unreachable, as an os.File is (its
// descriptor closed, so its space freed, its buffers freed or returned to
// their Pool), but only then, which may be never in a program that
// collects seldom: until then it holds its disk space and memory.
//
// Memory: the write buffers (Buffers × BufferSize, or what the Pool lends),
// plus what reads take from the reader core (internal/reader), allocated
// as they need it and freed by Close: a random read's buffer from pools
// of at most 128 of 16 KiB and 32 of 128 KiB plus a block (6.1 MiB; a
// read that finds them all in use gets one for itself rather than wait,
// and one longer than a large buffer reads straight into the caller's
// slice), and the sequential window's two reads of 512 KiB (rounded up to
// whole write buffers). Reads go through a queue of their own, made at
// the first queued read, so that no read waits behind a write: the
// core's, of 64 entries, and the window's, of 2.
// Random reads fetch only the aligned blocks they need (at least 8 KiB);
// a reader that reads on where the last disk read ended is sequential and
// gets the window, whose reads double from 64 KiB up to 512 KiB, the next
// one read in the background while it parses, as the kernel's readahead
// does. Random readers do not take that window from a sequential reader
// that is still using it.
type File struct {
	wmu sync.Mutex // the writer side: held across its device waits
	hdr [blobio.MaxHeaderSize]byte

	// mu is the state lock: what is where, the appender's buffers and
	// size (through appender.Options.Lock). Never held across a device
	// wait, and by readers only to look and copy, so that the writer,
	// which takes it once per blob, never queues behind the readers'
	// own bookkeeping. Not RWMutex: an RWMutex costs twice the atomics.
	// Allocated apart, as rd is: the appender holds it, and what an
	// unclosed File's cleanup holds must not point into the File.
	mu *sync.Mutex
	ap *appender.Appender
	f  fallback.File

	// rmu guards the readers' state: closed, reading's count and rd.
	// Never held across a device wait either; taken before mu.
	rmu     sync.Mutex
	closed  bool // set with wmu and rmu held: either guards a read of it
	reading sync.WaitGroup
	rd      *readState
	cleanup runtime.Cleanup // releases an unclosed File's resources; stopped by Close
	meter   *direct.Meter   // the file's counts (Stats), closed by the appender
}

// fileResources are what an unclosed File's cleanup releases. They do not
// refer to the File, or it would never be unreachable.
type fileResources struct {
	ap *appender.Appender
	rd *readState
}

// release frees what a File holds: the window and the reader core's
// queue and buffers, then, through Discard, its write buffers and its
// descriptor, after the I/O in flight. Nothing is written. Called by
// Close, with no reader left, or by the cleanup, when none can be.
func (r fileResources) release() error {
	r.rd.recent.put()
	r.rd.recent = span{}
	r.rd.win.Close()
	r.rd.c.Close() // its queue and pools; the file is the appender's to close
	return r.ap.Discard()
}

// minRead is the least a random read fetches: a header read then brings
// the payload of a blob up to about 8 KiB in the same device read (a
// PostgreSQL page image, the commonest value Neon's ephemeral files hold).
const minRead = 8 << 10

// The sequential window's reads: from firstWindowRead after it starts,
// doubling up to windowRead (rounded up to whole write buffers), one
// parsed while the next is read: sequential reads of 512 KiB instead of
// 64 KiB run several times faster on the disks measured here, which
// charge for every request.
const (
	firstWindowRead = 64 << 10
	windowRead      = 512 << 10
)

// streamHold is how long the sequential window stays its reader's after
// its last move, before a reader that looks sequential elsewhere may take
// it: longer than a runnable goroutine waits for a CPU on a loaded
// machine. With a count of 32 random reads instead, a scan on tmpfs beside
// 8 random readers lost its window all the time (TestRandomReadersKeep-
// SequentialWindow: 0 reads of 512 KiB of 14).
const streamHold = 200 * time.Millisecond

// readState is what the readers share, under File.rmu.
type readState struct {
	c      *reader.Reader // the reader core over the file: its pools, its queue, the EIO split
	win    *reader.Window // the sequential window
	busy   bool           // a reader is moving the window, outside rmu
	used   time.Time      // when a reader last moved the window
	recent span           // the last random read's buffer: a reader that goes on where it ended is sequential
}

// span is a pooled read buffer holding the file's bytes [off, off+n), all
// of them final on disk when read.
type span struct {
	b    *reader.Buf
	pool *reader.Pool
	off  int64
	n    int
}

// copy copies the span's bytes at pos into p and returns how many.
func (s *span) copy(p []byte, pos int64) int {
	if s.b == nil || pos < s.off || pos >= s.off+int64(s.n) {
		return 0
	}
	return copy(p, s.b.Buf.Bytes()[pos-s.off:s.n])
}

// put gives the span's buffer back to its pool.
func (s *span) put() {
	if s.b != nil {
		s.pool.Put(s.b)
		s.b = nil
	}
}

// noClose is the file as the reader core sees it: the appender closes it.
type noClose struct{ fallback.File }

func (noClose) Close() error { return nil }

// Create creates a temporary file in dir that no other open can reach
// and that is gone once closed: on Linux an unnamed one (O_TMPFILE), else
// where the filesystem lacks it and on darwin and the BSDs one under a
// random name unlinked at once, and on Windows one under a random name
// deleted when its handle closes (through the page cache only there: a
// policy demanding O_DIRECT fails with an error matching
// direct.ErrNotSupported).
func Create(dir string, o *Options) (*File, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	ao := appender.Options{BufferSize: opts.BufferSize, Buffers: opts.Buffers, Pool: opts.Pool, Context: opts.Context, Retry: opts.Retry, IO: opts.IO}
	if err := opts.validate(ao); err != nil {
		return nil, err
	}
	m, err := direct.NewMeter(&direct.MeterOptions{SyncLatency: true, Slow: opts.Slow})
	if err != nil {
		return nil, fmt.Errorf("%w: Slow: %w", ErrInvalidOptions, err)
	}
	f, err := createTemp(dir, opts.IO)
	if err != nil {
		m.Close()
		return nil, err
	}
	if opts.Faults != nil {
		f = fallback.WithFaults(f, opts.Faults) // every read and write meets them
	}
	f = fallback.WithMeter(f, m)
	file := &File{f: f, mu: new(sync.Mutex), meter: m}
	ao.Lock, ao.Meter = file.mu, m // the appender closes m
	ap, err := appender.New(f, ao)
	if err != nil {
		// The file has no name: closing it leaves nothing behind.
		m.Close()
		f.Close()
		return nil, appender.WrapInvalid(err, ErrInvalidOptions)
	}
	file.ap = ap
	c, err := reader.New(noClose{f}, 0, reader.Options{Name: "ephemeral", Closed: ErrClosed, Invalid: ErrInvalidOptions, Offset: ErrOffset})
	if err != nil {
		ap.Discard()
		return nil, err
	}
	read := aligned.Up(windowRead, ap.BufferSize())
	file.rd = &readState{c: c, win: c.NewWindow(reader.WindowOptions{First: firstWindowRead, Max: read, Ring: 2})}
	file.cleanup = runtime.AddCleanup(file, func(r fileResources) { r.release() }, fileResources{ap: ap, rd: file.rd})
	return file, nil
}

// validate refuses, before any file exists, Options that no file could
// use: the appender's checks of the policy, sizes and counts, and a Pool
// that no O_DIRECT file could take when the policy demands O_DIRECT.
// appender.New checks the Pool against the file's own alignment.
func (o *Options) validate(ao appender.Options) error {
	if err := ao.Validate(); err != nil {
		return appender.WrapInvalid(err, ErrInvalidOptions)
	}
	if p := o.Pool; p != nil && (o.IO == fallback.Direct || o.IO == fallback.DirectPwrite) {
		// O_DIRECT demands at least this much alignment everywhere.
		if a := (direct.Alignment{Memory: direct.MinAlignment, Offset: direct.MinAlignment}); p.BufferSize()%a.Block() != 0 || p.Align()%a.Memory != 0 {
			return fmt.Errorf("%w: a pool of %d-byte buffers aligned to %d does not fit O_DIRECT's alignment of at least %v",
				ErrInvalidOptions, p.BufferSize(), p.Align(), a)
		}
	}
	return nil
}

// cached copies the bytes at pos that are in the appender's buffers into
// p, under the state lock, and returns how many; when it holds none, it
// returns where the next buffered stretch starts instead: [pos, final) is
// final on disk. With an empty p it only reports whether pos is in memory
// (1) or not.
func (f *File) cached(p []byte, pos int64) (n int, final int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	mem, final := f.ap.Cached(pos)
	if mem == nil {
		return 0, final
	}
	if len(p) == 0 {
		return 1, 0
	}
	return copy(p, mem), 0
}

// Mode reports the I/O path the file uses.
func (f *File) Mode() fallback.Mode { return f.f.Mode() }

// Size returns the number of bytes appended.
func (f *File) Size() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ap.Size()
}

// Write appends p; its offset is Size before the call. A device write
// that failed with ENOSPC, EDQUOT or EIO loses no byte: the next Write
// writes it again (see the package doc); other I/O errors stay.
func (f *File) Write(p []byte) (int, error) {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	if f.closed {
		return 0, ErrClosed
	}
	return f.ap.Write(p)
}

// WriteBlob appends p as one blob in blobio's format and returns its
// offset.
func (f *File) WriteBlob(p []byte) (off int64, err error) {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	if f.closed {
		return 0, ErrClosed
	}
	if err := f.ap.Err(); err != nil {
		return 0, err
	}
	hdr, err := blobio.AppendHeader(f.hdr[:0], len(p), blobio.None)
	if err != nil {
		return 0, err
	}
	return f.ap.WriteRecord(hdr, p)
}

// Flush writes everything appended so far (the last block padded with
// zeros) and waits for it. The bytes stay readable as before.
func (f *File) Flush() error {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	if f.closed {
		return ErrClosed
	}
	return f.ap.Flush()
}

// Sync flushes and fdatasyncs: for a caller that wants the bytes on the
// device, such as a benchmark comparing with durable writes. A temporary
// file never needs it for correctness.
func (f *File) Sync() error {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	if f.closed {
		return ErrClosed
	}
	return f.ap.Sync()
}

// Fd returns the file descriptor, for inspection (fstat, mincore); reads
// and writes go through the methods above.
func (f *File) Fd() uintptr { return f.f.Fd() }

// Close discards the file: it waits for the reads in progress, drops what
// was not written, gives the buffers back to their pool, and frees the
// file's space. Later calls return ErrClosed.
func (f *File) Close() error {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	f.rmu.Lock()
	if f.closed {
		f.rmu.Unlock()
		return ErrClosed
	}
	f.closed = true
	f.rmu.Unlock()
	f.reading.Wait()
	// Nobody else reads now: the read state is ours without the lock.
	f.cleanup.Stop()
	return fileResources{ap: f.ap, rd: f.rd}.release()
}

// ReadAt reads len(p) bytes at off, from memory where the bytes are still
// buffered and from the disk otherwise. At the end of the file it returns
// the bytes there are and io.EOF; a negative off gives an error matching
// ErrOffset. A read over an unreadable sector returns the bytes before
// it and a *direct.SectorError naming it.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	r, err := f.startRead()
	if err != nil {
		return 0, err
	}
	defer r.end()
	if off < 0 {
		return 0, offsetError{fmt.Sprintf("ReadAt at negative offset %d", off)}
	}
	size := f.Size()
	if len(p) > 0 && off < size {
		f.meter.Asked(direct.OpRead, len(p))
	}
	return r.read(p, off, off+int64(len(p)), size)
}

// ReadBlob reads the blob at off, appending it to dst[:0]. An offset at
// or past Size, or a negative one, gives an error matching ErrOffset (and
// blobio.ErrOffset); a header that is not a blob's a *blobio.CorruptError
// at off, matching blobio.ErrCorrupt.
func (f *File) ReadBlob(off int64, dst []byte) ([]byte, error) {
	r, err := f.startRead()
	if err != nil {
		return dst[:0], err
	}
	defer r.end()
	// One look at the size for the whole call: a blob acknowledged before
	// it lies within, and the writer's lock is taken less.
	fileSize := f.Size()
	if off < 0 || off >= fileSize {
		return dst[:0], offsetError{fmt.Sprintf("blob at %d, size %d", off, fileSize)}
	}
	// Read the header's first byte, and the rest only for a long header:
	// reading past a short header could move the sequential window on to
	// the next buffer and send the payload read back to the one before.
	var h [blobio.MaxHeaderSize]byte
	if _, err := r.read(h[:1], off, off+minRead, fileSize); err != nil {
		return dst[:0], err
	}
	n := 1
	hs, size, c, err := blobio.DecodeHeader(h[:n])
	if err == io.ErrUnexpectedEOF {
		k, rerr := r.read(h[1:], off+1, off+minRead, fileSize)
		if rerr != nil && rerr != io.EOF {
			return dst[:0], rerr
		}
		n += k
		hs, size, c, err = blobio.DecodeHeader(h[:n])
	}
	switch {
	case err != nil:
		return dst[:0], blobError(off, err)
	case c != blobio.None:
		return dst[:0], corrupt{&blobio.CorruptError{Off: off, Reason: "compressed, and an ephemeral file never compresses"}}
	}
	// Check the claimed size before allocating for it: a corrupt header
	// may claim 256 MiB in a file of 1 KiB.
	start, end := off+int64(hs), off+int64(hs)+int64(size)
	if end > fileSize {
		return dst[:0], fmt.Errorf("ephemeral: blob at %d: %d bytes run past the end of the file at %d: %w", off, size, fileSize, io.ErrUnexpectedEOF)
	}
	f.meter.Asked(direct.OpRead, hs+size)
	if cap(dst) < size {
		f.rmu.Unlock() // no allocation under the lock
		dst = slices.Grow(dst[:0], size)
		f.rmu.Lock()
	}
	dst = dst[:size]
	if _, err := r.read(dst, start, end, fileSize); err != nil {
		return dst[:0], err
	}
	return dst, nil
}

// A readCall is one ReadAt or ReadBlob call, from startRead to end, which
// it spends holding File.rmu but for its device waits. Its buffer is its
// own from its first random read to end, which keeps it as the last
// random read's.
type readCall struct {
	f   *File
	buf span
}

// startRead locks f for a read that Close will wait for.
func (f *File) startRead() (readCall, error) {
	f.rmu.Lock()
	if f.closed {
		f.rmu.Unlock()
		return readCall{}, ErrClosed
	}
	f.reading.Add(1)
	return readCall{f: f}, nil
}

// end keeps the reader's buffer as the last random read's, and releases
// the lock.
func (r *readCall) end() {
	f := r.f
	if r.buf.n > 0 {
		f.rd.recent.put()
		f.rd.recent = r.buf
	} else {
		r.buf.put()
	}
	r.buf = span{}
	f.rmu.Unlock()
	f.reading.Done()
}

// read copies the file's bytes [off, off+len(p)) into p, with f.rmu held,
// and reports io.EOF at size, the file's size at most. want is where the
// caller's reads end, so that a disk read may fetch them at once.
func (r *readCall) read(p []byte, off, want, size int64) (int, error) {
	f, rd := r.f, r.f.rd
	end := min(off+int64(len(p)), size)
	pos := off
	for pos < end {
		dst := p[pos-off : end-off]
		// A byte final on disk never changes, so whichever copy holds it
		// will do: this call's buffer, the last random read's, the
		// window's, or the appender's.
		k := r.buf.copy(dst, pos)
		if k == 0 {
			k = rd.recent.copy(dst, pos)
		}
		if k == 0 && !rd.busy {
			k = copy(dst, rd.win.Peek(pos))
		}
		var final int64
		if k == 0 {
			k, final = f.cached(dst, pos)
		}
		if k == 0 {
			// [pos, final) is on disk, final.
			var err error
			if !rd.busy && (pos == rd.win.Frontier() || pos == rd.recent.off+int64(rd.recent.n) && f.takeWindow()) {
				k = f.advance(dst, pos, final)
			}
			if k == 0 {
				k, err = r.fill(dst, pos, max(end, want), final)
			}
			if err != nil {
				return int(pos-off) + k, err
			}
		}
		pos += int64(k)
	}
	if n := int(pos - off); n < len(p) {
		return n, io.EOF
	}
	return len(p), nil
}

// fill reads the file's bytes from pos's block towards want into the
// reader's own buffer, from the reader core's pools, and copies those at
// pos into dst; they are final on disk up to final. A range longer than a
// large buffer is read straight into dst. f.rmu is held, and released
// for the device wait.
func (r *readCall) fill(dst []byte, pos, want, final int64) (int, error) {
	c := r.f.rd.c
	lo := aligned.Down(pos, c.Align())
	hi := min(aligned.Up(max(want, pos+minRead), c.Align()), aligned.Up(final, c.Align()))
	r.f.rmu.Unlock()
	defer r.f.rmu.Lock()
	if hi-lo > int64(c.Large().Size()) {
		return c.ReadSpan(dst[:min(int64(len(dst)), final-pos)], pos)
	}
	if pool := c.PoolFor(hi - lo); r.buf.b == nil || r.buf.pool != pool {
		r.buf.put()
		b, err := pool.GetAny()
		if err != nil {
			return 0, err
		}
		r.buf = span{b: b, pool: pool}
	}
	buf := r.buf.b.Buf.Bytes()
	r.buf.n = 0
	n, err := c.Read(r.buf.b.Done, buf[:hi-lo], lo)
	r.buf.off, r.buf.n = lo, int(min(int64(n), final-lo))
	k := r.buf.copy(dst, pos) // the bytes before bad sectors too (direct.SectorError)
	switch {
	case k == len(dst):
		return k, nil // what was asked: bad sectors past it concern a later read
	case err != nil:
		return k, fmt.Errorf("ephemeral: reading at %d: %w", pos+int64(k), err)
	case k == 0:
		return 0, fmt.Errorf("ephemeral: reading at %d: file ends at %d: %w", pos, lo+int64(n), io.ErrUnexpectedEOF)
	}
	return k, nil
}

// takeWindow reports whether a reader that goes on where the last random
// read ended may take the sequential window: unless it is a scan's, in
// whole reads, that its reader still uses. f.rmu is held.
func (f *File) takeWindow() bool {
	rd := f.rd
	return !rd.win.Grown() || time.Since(rd.used) >= streamHold
}

// advance copies the bytes at pos into dst from the sequential window,
// moving it on to pos (or starting it there); [pos, final) is final on
// disk. A window read that fails (refused, or an EIO that passes) is
// dropped: advance returns 0, and the reader reads in the foreground,
// which reports what persists. f.rmu is held, and released while the
// window reads.
func (f *File) advance(dst []byte, pos, final int64) int {
	rd := f.rd
	rd.busy = true
	rd.used = time.Now()
	f.rmu.Unlock()
	rd.win.SetSize(final)
	b, err := rd.win.Next(pos)
	k := copy(dst, b)
	f.rmu.Lock()
	rd.busy = false
	if err != nil {
		return 0
	}
	return k
}

// RetryPolicy is Options.Retry: retry failures that can pass (ENOSPC,
// EDQUOT, EIO) with backoff until Context ends, telling OnRetry of each.
type RetryPolicy = appender.RetryPolicy
