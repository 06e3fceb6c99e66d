package ephemeral

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/appender"
)

var (
	// ErrClosed reports use of a closed File. It matches fs.ErrClosed too,
	// as os.File's errors do.
	ErrClosed = fmt.Errorf("ephemeral: %w", fs.ErrClosed)
	// ErrInvalidOptions reports Options that Create refuses, before any
	// file is created.
	ErrInvalidOptions = errors.New("ephemeral: invalid options")
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
// plus read buffers of 512 KiB (rounded up to whole write buffers),
// allocated as reads need them and freed by Close: one per read waiting
// for the disk, at most 16 at once (more readers wait for one), two for
// the sequential window and its read-ahead, and one keeping the last
// random read, so at most 19 (9.5 MiB by default). Reads go through a
// queue of their own, made at the first disk read so that no read waits
// behind a write: an io_uring ring of 18 entries, or 18 worker goroutines
// on the pwrite engine.
// Random reads fetch only the aligned blocks they need (at least 8 KiB);
// a reader that reads on where the last disk read ended is sequential and
// gets reads that double up to 512 KiB, the next one read in the
// background while it parses, as the kernel's readahead does. Random
// readers do not take that window from a sequential reader that is still
// using it.
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
}

// fileResources are what an unclosed File's cleanup releases. They do not
// refer to the File, or it would never be unreachable.
type fileResources struct {
	ap *appender.Appender
	rd *readState
}

// release frees what a File holds: its read buffers and queue, then,
// through Discard, its write buffers and its descriptor, after the I/O in
// flight. Nothing is written. Called by Close, with no reader left, or by
// the cleanup, when none can be.
func (r fileResources) release() error {
	rd := r.rd
	if rd.st.ahead {
		rd.q.Await(rd.st.next.done)
		rd.st.ahead = false
	}
	if rd.q != nil {
		rd.q.Close()
	}
	for _, b := range rd.all {
		b.Free()
	}
	rd.all, rd.free, rd.st.cur, rd.st.next, rd.recent = nil, nil, nil, nil, nil
	return r.ap.Discard()
}

// readAheadSize is the size of each read buffer, rounded up to whole write
// buffers: sequential reads of 512 KiB instead of 64 KiB run several times
// faster on the disks measured here, which charge for every request.
const readAheadSize = 512 << 10

// maxReads is how many reads of one File wait for the disk at once; more
// readers wait for a buffer. 16 is the queue depth at which 4 KiB random
// reads on the virtio disk measured here reach 63,000/s with fio, 9× its
// depth-1 rate (issue 13's table); the memory it costs is stated in File's
// doc.
const maxReads = 16

// minRead is the least a random read fetches: a header read then brings
// the payload of a blob up to about 8 KiB in the same device read (a
// PostgreSQL page image, the commonest value Neon's ephemeral files hold).
const minRead = 8 << 10

// streamHold is how long the sequential window stays its reader's after
// its last move, before a reader that looks sequential elsewhere may take
// it: longer than a runnable goroutine waits for a CPU on a loaded
// machine. With a count of 32 random reads instead, a scan on tmpfs beside
// 8 random readers lost its window all the time (TestRandomReadersKeep-
// SequentialWindow: 0 reads of 512 KiB of 14).
const streamHold = 200 * time.Millisecond

// readState is what the readers share, under File.rmu.
type readState struct {
	q      direct.Queue      // the readers' own queue, made at the first disk read, so no read waits behind a write
	tokens chan struct{}     // one per read buffer a reader holds: at most maxReads
	free   []*readBuf        // read buffers not in use
	size   int               // bytes per read buffer
	st     stream            // the sequential window
	recent *readBuf          // the last random read's buffer: a reader that goes on where it ended is sequential
	all    []*aligned.Buffer // every read buffer, for Close
}

// readBuf is an aligned read buffer holding the file's bytes [off, off+n),
// all of them final on disk when read.
type readBuf struct {
	b    *aligned.Buffer
	done chan direct.Completion
	off  int64
	n    int
	read int // bytes the read that filled it asked for
}

// copy copies the buffer's bytes at pos into p and returns how many.
func (b *readBuf) copy(p []byte, pos int64) int {
	if b == nil || pos < b.off || pos >= b.off+int64(b.n) {
		return 0
	}
	return copy(p, b.b.Bytes()[pos-b.off:b.n])
}

// stream is the window of the last sequential read. A read that starts
// where it ends moves it on, doubling the next read's size up to a whole
// buffer; once its reads are whole buffers, the next one is read into next
// in the background. A read that starts where the last random read ended
// takes the window over, unless it is a scan's (reads of whole buffers)
// that its reader used within streamHold: so random readers never take it
// from a scan, and a new sequential reader gets it once the scan is done. Only the reader that
// set busy changes cur's bytes, next or the ahead fields, outside the lock.
type stream struct {
	cur  *readBuf
	next *readBuf  // the read-ahead's buffer
	busy bool      // a reader is moving the window on
	used time.Time // when a reader last read from the window

	ahead      bool // a read of [aheadOff, aheadFinal) is in flight into next
	aheadOff   int64
	aheadFinal int64
}

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
	ao := appender.Options{BufferSize: opts.BufferSize, Buffers: opts.Buffers, Pool: opts.Pool, Context: opts.Context, Retry: opts.Retry}
	if err := opts.validate(ao); err != nil {
		return nil, err
	}
	f, err := createTemp(dir, opts.IO)
	if err != nil {
		return nil, err
	}
	if opts.Faults != nil {
		f = fallback.WithFaults(f, opts.Faults) // every read and write meets them
	}
	file := &File{f: f, mu: new(sync.Mutex), rd: new(readState)}
	ao.Lock = file.mu
	ap, err := appender.New(f, ao)
	if err != nil {
		// The file has no name: closing it leaves nothing behind.
		f.Close()
		return nil, appender.WrapInvalid(err, ErrInvalidOptions)
	}
	file.ap = ap
	file.rd.size = aligned.Up(readAheadSize, ap.BufferSize())
	file.rd.tokens = make(chan struct{}, maxReads)
	file.cleanup = runtime.AddCleanup(file, func(r fileResources) { r.release() }, fileResources{ap: ap, rd: file.rd})
	return file, nil
}

// validate refuses, before any file exists, Options that no file could
// use: the appender's checks of sizes and counts, the policy, and a Pool
// that no O_DIRECT file could take when the policy demands O_DIRECT.
// appender.New checks the Pool against the file's own alignment.
func (o *Options) validate(ao appender.Options) error {
	if !o.IO.Valid() {
		return fmt.Errorf("%w: unknown IO policy %v", ErrInvalidOptions, o.IO)
	}
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

// Write appends p; its offset is Size before the call. After an I/O error
// every Write returns that error.
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
// the bytes there are and io.EOF.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	r, err := f.startRead()
	if err != nil {
		return 0, err
	}
	defer r.end()
	if off < 0 {
		return 0, fmt.Errorf("ephemeral: read at negative offset %d", off)
	}
	return r.read(p, off, off+int64(len(p)), f.Size())
}

// ReadBlob reads the blob at off, appending it to dst[:0]. A header that is
// not a blob's gives a *blobio.CorruptError at off, matching blobio.ErrCorrupt.
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
		return dst[:0], fmt.Errorf("%w: offset %d, size %d", blobio.ErrOffset, off, fileSize)
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
		return dst[:0], &blobio.CorruptError{Off: off, Reason: "compressed, and an ephemeral file never compresses"}
	}
	// Check the claimed size before allocating for it: a corrupt header
	// may claim 256 MiB in a file of 1 KiB.
	start, end := off+int64(hs), off+int64(hs)+int64(size)
	if end > fileSize {
		return dst[:0], fmt.Errorf("ephemeral: blob at %d: %d bytes run past the end of the file at %d: %w", off, size, fileSize, io.ErrUnexpectedEOF)
	}
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

// A reader is one ReadAt or ReadBlob call, from startRead to end, which
// it spends holding File.rmu but for its device waits. Its buffer is its
// own from its first disk read to end, which offers it to the stream.
type reader struct {
	f   *File
	buf *readBuf
}

// startRead locks f for a read that Close will wait for.
func (f *File) startRead() (reader, error) {
	f.rmu.Lock()
	if f.closed {
		f.rmu.Unlock()
		return reader{}, ErrClosed
	}
	f.reading.Add(1)
	return reader{f: f}, nil
}

// end releases the reader's buffer and the lock.
func (r *reader) end() {
	f := r.f
	if r.buf != nil {
		f.donate(r.buf)
		r.buf = nil
		<-f.rd.tokens
	}
	f.rmu.Unlock()
	f.reading.Done()
}

// read copies the file's bytes [off, off+len(p)) into p, with f.rmu held,
// and reports io.EOF at size, the file's size at most. want is where the
// caller's reads end, so that a disk read may fetch them at once.
func (r *reader) read(p []byte, off, want, size int64) (int, error) {
	f := r.f
	end := min(off+int64(len(p)), size)
	pos := off
	for pos < end {
		dst := p[pos-off : end-off]
		// A byte final on disk never changes, so whichever copy holds it
		// will do: this call's buffer, the stream's, or the appender's.
		if k := r.buf.copy(dst, pos); k > 0 {
			pos += int64(k)
			continue
		}
		if k := f.rd.st.cur.copy(dst, pos); k > 0 {
			// No time.Now here: it cost a tenth of a scan's CPU. The
			// window's time is that of its last move (see streamHold).
			pos += int64(k)
			continue
		}
		if k := f.rd.recent.copy(dst, pos); k > 0 {
			pos += int64(k)
			continue
		}
		k, final := f.cached(dst, pos)
		if k > 0 {
			pos += int64(k)
			continue
		}
		// [pos, final) is on disk, final.
		var err error
		st, recent := &f.rd.st, f.rd.recent
		switch {
		case st.cur != nil && st.n() > 0 && pos == st.end() && !st.busy:
			err = f.advance(pos, final)
		case recent != nil && recent.n > 0 && pos == recent.off+int64(recent.n) && f.takeWindow():
			err = f.advance(pos, final)
		default:
			err = r.fill(pos, max(end, want), final)
		}
		if err != nil {
			return int(pos - off), err
		}
	}
	if n := int(pos - off); n < len(p) {
		return n, io.EOF
	}
	return len(p), nil
}

func (s *stream) n() int        { return s.cur.n }
func (s *stream) end() int64    { return s.cur.off + int64(s.cur.n) }
func (f *File) offAlign() int64 { return int64(f.f.Alignment().Offset) }

// fill reads the file's bytes from pos's block towards want into the
// reader's own buffer; they are final on disk up to final. f.rmu is held,
// and released for the device wait.
func (r *reader) fill(pos, want, final int64) error {
	f := r.f
	if r.buf == nil {
		b, err := f.takeBuf()
		if err != nil {
			return err
		}
		r.buf = b
	}
	al := f.offAlign()
	lo := aligned.Down(pos, al)
	hi := min(aligned.Up(max(want, pos+minRead), al), lo+int64(f.rd.size), aligned.Up(final, al))
	r.buf.n = 0
	n, err := f.readDisk(r.buf, lo, int(hi-lo))
	if err != nil {
		return err
	}
	return r.buf.set(lo, n, int(hi-lo), pos, final)
}

// set records that b holds the bytes read at lo, n of them, of which only
// those before final count, and checks that pos is among them.
func (b *readBuf) set(lo int64, n, read int, pos, final int64) error {
	b.off, b.n, b.read = lo, int(min(int64(n), final-lo)), read
	if b.n <= int(pos-lo) {
		b.n = 0
		return fmt.Errorf("ephemeral: reading at %d: file ends at %d: %w", pos, lo+int64(n), io.ErrUnexpectedEOF)
	}
	return nil
}

// takeBuf returns a read buffer for a reader, waiting (without f.rmu) while
// maxReads readers hold one.
func (f *File) takeBuf() (*readBuf, error) {
	select {
	case f.rd.tokens <- struct{}{}:
	default:
		f.rmu.Unlock()
		f.rd.tokens <- struct{}{}
		f.rmu.Lock()
	}
	b, err := f.newBuf()
	if err != nil {
		<-f.rd.tokens
	}
	return b, err
}

// newBuf returns a free read buffer, or a new one. The buffers are the
// file's own, outside any shared pool (a reader waiting on a pool whose
// budget the writers hold would never wake). There are at most
// maxReads+3: one per token, the stream's two and the last random read.
func (f *File) newBuf() (*readBuf, error) {
	rd := f.rd
	if k := len(rd.free); k > 0 {
		b := rd.free[k-1]
		rd.free = rd.free[:k-1]
		b.n = 0
		return b, nil
	}
	b, err := aligned.New(rd.size, max(f.f.Alignment().Memory, direct.MinAlignment))
	if err != nil {
		return nil, err
	}
	rd.all = append(rd.all, b)
	return &readBuf{b: b, done: make(chan direct.Completion, 1)}, nil
}

// donate keeps a reader's buffer, done with, as the last random read, so
// that a reader that goes on where it stopped is seen to be sequential.
// f.rmu is held.
func (f *File) donate(b *readBuf) {
	if b.n == 0 {
		f.rd.free = append(f.rd.free, b)
		return
	}
	if f.rd.recent != nil {
		f.rd.free = append(f.rd.free, f.rd.recent)
	}
	f.rd.recent = b
}

// takeWindow makes the last random read the sequential window, unless the
// window is a scan's, in whole buffers, that its reader still uses. f.rmu
// is held.
func (f *File) takeWindow() bool {
	st := &f.rd.st
	if st.busy || st.cur != nil && st.cur.read == f.rd.size && time.Since(st.used) < streamHold {
		return false
	}
	if st.ahead {
		// A read-ahead nobody came for: wait for its buffer, and let
		// the next read take the window.
		st.busy = true
		f.rmu.Unlock()
		f.rd.q.Await(st.next.done)
		f.rmu.Lock()
		st.busy, st.ahead = false, false
		return false
	}
	if st.cur != nil {
		f.rd.free = append(f.rd.free, st.cur)
	}
	st.cur, f.rd.recent = f.rd.recent, nil
	return true
}

// readQueue returns the readers' queue, making it at the first disk read.
// f.rmu is held.
func (f *File) readQueue() (direct.Queue, error) {
	if f.rd.q == nil {
		// Reads in flight: one per token, the stream's foreground read or
		// read-ahead, and one to spare.
		q, err := f.f.NewQueue(&direct.QueueOptions{Depth: maxReads + 2})
		if err != nil {
			return nil, err
		}
		f.rd.q = q
	}
	return f.rd.q, nil
}

// readDisk reads n bytes at off into b, which is the caller's alone, with
// f.rmu released during the device wait. It returns the bytes read; a read
// cut short by the end of the file is no error here.
func (f *File) readDisk(b *readBuf, off int64, n int) (int, error) {
	q, err := f.readQueue()
	if err != nil {
		return 0, err
	}
	f.rmu.Unlock()
	defer f.rmu.Lock()
	if err := q.Submit(direct.Request{Op: direct.OpRead, Buf: b.b.Bytes()[:n], Off: off, Done: b.done}); err != nil {
		return 0, err
	}
	c := q.Await(b.done)
	if c.Err != nil && c.Err != io.EOF {
		return c.N, c.Err
	}
	return c.N, nil
}

// advance moves the stream on to pos, where it ends: from the read-ahead
// when it holds pos, else with a read twice the last one's size, up to a
// whole buffer. The bytes from pos are final on disk up to final. f.rmu is
// held, and released for the device waits.
func (f *File) advance(pos, final int64) error {
	st := &f.rd.st
	st.busy = true
	defer func() { st.busy = false }()
	st.used = time.Now()
	if st.ahead {
		f.rmu.Unlock()
		c := f.rd.q.Await(st.next.done)
		f.rmu.Lock()
		st.ahead = false
		// A failed read-ahead is dropped, not reported: the read below
		// tries again and reports what persists.
		if pos == st.aheadOff && (c.Err == nil || c.Err == io.EOF) && c.N > 0 {
			st.next.off, st.next.n, st.next.read = st.aheadOff, int(min(int64(c.N), st.aheadFinal-st.aheadOff)), f.rd.size
			st.cur, st.next = st.next, st.cur
			f.startAhead()
			return nil
		}
	}
	size := min(max(2*st.cur.read, f.ap.BufferSize()), f.rd.size)
	al := f.offAlign()
	lo := aligned.Down(pos, al)
	hi := min(lo+int64(size), aligned.Up(final, al))
	st.cur.n = 0 // its bytes change now
	if size == f.rd.size && hi == lo+int64(size) && hi < final {
		// The window's first whole read, with bytes on disk past it:
		// the read-ahead goes with it, one batch.
		return f.advanceWithAhead(lo, hi, pos, final)
	}
	n, err := f.readDisk(st.cur, lo, int(hi-lo))
	if err != nil {
		return err
	}
	if err := st.cur.set(lo, n, size, pos, final); err != nil {
		return err
	}
	if size == f.rd.size {
		f.startAhead()
	}
	return nil
}

// advanceWithAhead reads [lo, hi), a whole buffer, into the window and
// the buffer after it into the read-ahead, submitted together (one
// io_uring_enter on the io_uring engine), and waits for the first: the
// read-ahead then runs while the caller parses, instead of starting once
// the window's read is done. A read-ahead the queue refuses is dropped,
// as startAhead drops one; a refused window read is the caller's error.
// f.rmu is held, st.busy set; the lock is released for the device wait.
func (f *File) advanceWithAhead(lo, hi, pos, final int64) error {
	st := &f.rd.st
	if st.next == nil {
		if b, err := f.newBuf(); err == nil { // else no read-ahead, as in startAhead
			st.next = b
		}
	}
	q, err := f.readQueue()
	if err != nil {
		return err
	}
	rs := [2]direct.Request{{Op: direct.OpRead, Buf: st.cur.b.Bytes()[:hi-lo], Off: lo, Done: st.cur.done}}
	k := 1
	if st.next != nil {
		st.next.n = 0
		rs[1] = direct.Request{Op: direct.OpRead, Buf: st.next.b.Bytes(), Off: hi, Done: st.next.done}
		k = 2
	}
	f.rmu.Unlock()
	m, err := direct.SubmitBatch(q, rs[:k])
	var c direct.Completion
	if m > 0 {
		c = q.Await(st.cur.done)
	}
	f.rmu.Lock()
	if m == 2 {
		st.ahead, st.aheadOff, st.aheadFinal = true, hi, final
	}
	if m == 0 {
		return err
	}
	if c.Err != nil && c.Err != io.EOF {
		return c.Err
	}
	return st.cur.set(lo, c.N, int(hi-lo), pos, final)
}

// startAhead reads the bytes after the window into next in the background,
// if they are final on disk. f.rmu is held, st.busy set; the lock is
// released for the Submit, which may wait for the engine.
func (f *File) startAhead() {
	st := &f.rd.st
	at := st.end()
	if at%f.offAlign() != 0 {
		return
	}
	k, final := f.cached(nil, at)
	if k > 0 || at >= final {
		return
	}
	if st.next == nil {
		b, err := f.newBuf()
		if err != nil {
			return // no read-ahead: the next read waits for the device, that is all
		}
		st.next = b
	}
	q, err := f.readQueue()
	if err != nil {
		return
	}
	st.next.n = 0
	f.rmu.Unlock()
	err = q.Submit(direct.Request{Op: direct.OpRead, Buf: st.next.b.Bytes(), Off: at, Done: st.next.done})
	f.rmu.Lock()
	if err == nil {
		st.ahead, st.aheadOff, st.aheadFinal = true, at, final
	}
}

// blobError names the blob at off in err, which DecodeHeader returned: a
// corruption becomes a *blobio.CorruptError at off in the file.
func blobError(off int64, err error) error {
	var ce *blobio.CorruptError
	if errors.As(err, &ce) {
		return ce.At(off) // DecodeHeader's offsets are its input's: make them the file's
	}
	return fmt.Errorf("ephemeral: blob at %d: %w", off, err)
}

// RetryPolicy is Options.Retry: retry failures that can pass (ENOSPC,
// EDQUOT, EIO) with backoff until Context ends, telling OnRetry of each.
type RetryPolicy = appender.RetryPolicy
