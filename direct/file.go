package direct

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"strings"
	"syscall"
	"time"
)

// A File is an open file, either with O_DIRECT set (Open) or through the
// page cache (Buffered), with the same methods and queues either way. Its
// ReadAt and WriteAt accept only buffers, offsets and lengths that satisfy
// its Alignment, which is Alignment{1, 1} (any) for a buffered File. A File
// is safe for concurrent ReadAt and WriteAt on distinct ranges.
type File struct {
	xfer
	source Source
	unit   *atomicUnit // AtomicWrite's answer once statx gave it; shared by WithFaults' and WithWriteFlags' copies
}

// Open opens name with O_DIRECT added to flag, then discovers the file's
// alignment. If the filesystem refuses O_DIRECT the error matches
// ErrNotSupported, and a file that Open itself created is removed again
// (the kernel creates it before it checks the flag).
func Open(name string, flag int, perm os.FileMode) (*File, error) {
	creating := false
	if flag&os.O_CREATE != 0 {
		_, err := os.Lstat(name)
		creating = errors.Is(err, fs.ErrNotExist)
	}
	excl := 0
	if creating {
		// O_EXCL: the file the refusal below removes is the one this
		// open created, never one another process made since the Lstat.
		excl = os.O_EXCL
	}
	f, err := openDirect(name, flag|excl, perm)
	if creating && flag&os.O_EXCL == 0 && errors.Is(err, fs.ErrExist) {
		creating = false
		f, err = openDirect(name, flag, perm)
	}
	if err != nil {
		if errors.Is(err, syscall.EINVAL) && !strings.ContainsRune(name, 0) { // a NUL in the name is EINVAL before any filesystem sees it
			if creating {
				_ = os.Remove(name)
			}
			return nil, &os.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: %w", ErrNotSupported, syscall.EINVAL)}
		}
		return nil, err
	}
	a, src := discover(f)
	return &File{xfer: newXfer(f, a, true), source: src, unit: new(atomicUnit)}, nil
}

// Buffered wraps f, opened without O_DIRECT, in a File over the page cache:
// no alignment rules (Alignment{1, 1}), the same methods and queues as a
// direct File. Closing the File closes f.
func Buffered(f *os.File) *File {
	return &File{xfer: newXfer(f, pageCache, false), source: SourceNone}
}

// WithFaults returns a File over the same descriptor whose ReadAt, WriteAt
// and Sync, and every queue made from it, consult inj before each system
// call (after it, for io_uring), as QueueOptions.Faults does for one queue,
// which overrides it there. It is the seam for fault injection: the fault
// lands under the engine's own retries and resumption, where a real one
// would. Closing either File closes both.
func (f *File) WithFaults(inj Injector) *File {
	g := *f
	g.faults = inj
	return &g
}

// WithWriteFlags returns a File over the same descriptor whose writes,
// through WriteAt and every queue made from it, carry flags: RWF_* flags
// for pwritev2(2) on Linux (fallback sets RWF_DONTCACHE on a buffered
// File), added to those f's writes carry and to QueueOptions.WriteFlags.
// Elsewhere a write with flags fails with errors.ErrUnsupported. Closing
// either File closes both.
func (f *File) WithWriteFlags(flags int) *File {
	g := *f
	g.writeFlags |= flags
	return &g
}

// Name returns the name the file was opened with.
func (f *File) Name() string { return f.f.Name() }

// Fd returns the file descriptor (a handle on windows).
func (f *File) Fd() uintptr { return f.f.Fd() }

// OS returns the underlying *os.File, for operations this package does not
// wrap. Reading or writing through it must keep to the alignment.
func (f *File) OS() *os.File { return f.f }

// Alignment returns the alignment discovered when the file was opened.
func (f *File) Alignment() Alignment { return f.align }

// AlignmentSource says how the alignment was discovered.
func (f *File) AlignmentSource() Source { return f.source }

// ReadAt reads len(p) bytes at off. p's address, off and len(p) must be
// aligned, or the error matches ErrUnaligned and nothing is read. At the end
// of the file it returns the bytes read and io.EOF. A read that fails with
// EIO is read again sector by sector (see ReadSectors): every sector that
// can be read is, and the error is a *SectorError naming the ones that
// cannot.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.readAt(p, off)
	if errors.Is(err, syscall.EIO) {
		return f.splitRead(p, off, n, err)
	}
	return n, err
}

// WriteAt writes len(p) bytes at off, resuming short writes. p's address,
// off and len(p) must be aligned, or the error matches ErrUnaligned and
// nothing is written.
func (f *File) WriteAt(p []byte, off int64) (int, error) { return f.writeAt(p, off) }

// Sync makes the data written so far durable with fdatasync, and the file
// size with it when the size changed.
func (f *File) Sync() error { return f.sync() }

// Truncate changes the file's size. A size that is not aligned is allowed:
// it is how a writer cuts its padded last block back to the logical size.
func (f *File) Truncate(size int64) error {
	t := f.begin(OpTruncate, size, 0)
	err := f.f.Truncate(size)
	f.end(t, f.syncPath(), OpTruncate, 0, err, 0)
	return err
}

// Allocate reserves space for [off, off+n) with fallocate, growing the file
// when the range ends past it. Where the filesystem cannot, the error
// matches errors.ErrUnsupported.
func (f *File) Allocate(off, n int64) error {
	if err := f.fallocate(off, n); err != nil {
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
	}
	return nil
}

// Stat returns the file's os.FileInfo.
func (f *File) Stat() (os.FileInfo, error) { return f.f.Stat() }

// Close closes the file. It never waits for I/O: a ReadAt, WriteAt, Sync
// or queued request racing it either runs on the file it was given (the
// descriptor is used only while os.File holds a reference to it) or fails
// with an error matching fs.ErrClosed; none can reach another file that
// reuses the number. Close does not close the file's queues.
func (f *File) Close() error { return f.f.Close() }

// xfer moves bytes for one file, checking the alignment first when it has
// one. Both File and the engines use it.
//
// Every system call on the descriptor runs inside rc.Control, never on a
// number taken from Fd: Control holds os.File's reference count for the
// call, so a concurrent Close waits (without blocking Close itself, which
// leaves the last release to close the number) and a closed file fails
// with os.ErrClosed instead of reaching whatever file reuses the number.
type xfer struct {
	f      *os.File
	rc     syscall.RawConn
	align  Alignment // {1, 1} for a page-cache file
	direct bool      // EINVAL on an aligned transfer means O_DIRECT was refused
	faults Injector  // consulted before every system call; nil but in tests

	writeFlags int // RWF_* flags for every write; 0 for plain pwrite

	shard uint8  // the process-wide statistics' shard this file counts in
	meter *Meter // counts (and watches) this file's I/O too; nil: none
}

func newXfer(f *os.File, a Alignment, direct bool) xfer {
	rc, err := f.SyscallConn()
	if err != nil {
		rc = closedConn{} // f is nil; every call fails as on a closed file
	}
	return xfer{f: f, rc: rc, align: a, direct: direct, shard: pickShard()}
}

// closedConn is the RawConn of a file that cannot be used.
type closedConn struct{}

func (closedConn) Control(func(uintptr)) error    { return os.ErrClosed }
func (closedConn) Read(func(uintptr) bool) error  { return os.ErrClosed }
func (closedConn) Write(func(uintptr) bool) error { return os.ErrClosed }

// maxRetries bounds the retries of a transfer that keeps failing with
// EINTR or EAGAIN.
const maxRetries = 100

// once performs one pread or pwrite of p at off, or what the injector
// makes of it. A short transfer is reported after the real, whole one, as
// the io_uring engine does, so that it can be cut off the alignment.
func (x *xfer) once(op Op, p []byte, off int64) (int, error) {
	var f Fault
	if x.faults != nil {
		var ok bool
		if f, ok = x.faults.Inject(op, off, len(p)); ok {
			time.Sleep(f.Delay)
			if f.Err != 0 {
				return 0, f.Err
			}
		}
	}
	var n int
	var err error
	if op == OpRead {
		n, err = x.preadOnce(p, off)
	} else {
		n, err = x.pwriteOnce(p, off)
	}
	if f.Short > 0 && n > f.Short {
		n = f.Short
	}
	return n, err
}

// transient reports an error worth retrying, counting the retries.
func transient(err error, retries *int) bool {
	if !errors.Is(err, syscall.EINTR) && !errors.Is(err, syscall.EAGAIN) {
		return false
	}
	*retries++
	return *retries <= maxRetries
}

func (x *xfer) readAt(p []byte, off int64) (int, error)  { return x.transfer(OpRead, p, off) }
func (x *xfer) writeAt(p []byte, off int64) (int, error) { return x.transfer(OpWrite, p, off) }

// transfer reads or writes all of p at off, retrying EINTR and EAGAIN and
// resuming short transfers until one stopped, and counts it.
func (x *xfer) transfer(op Op, p []byte, off int64) (int, error) {
	if err := x.checkRW(op.syscall(), p, off); err != nil {
		return 0, err
	}
	t := x.begin(op, off, len(p))
	n, calls, err := x.move(op, p, off)
	x.end(t, x.syncPath(), op, n, err, calls-1)
	return n, err
}

// move is transfer's work; calls is the system calls it made.
func (x *xfer) move(op Op, p []byte, off int64) (n, calls int, err error) {
	retries := 0
	for n < len(p) {
		m, err := x.once(op, p[n:], off+int64(n))
		n += m
		calls++
		switch {
		case err != nil && transient(err, &retries):
		case err != nil:
			return n, calls, x.wrap(op, op.syscall(), err)
		case n < len(p) && x.stopped(m):
			return n, calls, x.cut(op, op.syscall())
		}
	}
	return n, calls, nil
}

// stopped reports whether a transfer that moved m bytes, fewer than it
// was asked for, cannot be resumed: it moved nothing, or it ended off the
// alignment, where a direct transfer cannot start again. Both engines end
// a request there, with cut's error.
func (x *xfer) stopped(m int) bool {
	return m == 0 || x.align.Offset > 0 && m%x.align.Offset != 0
}

// cut is the error of a transfer that stopped: for a read the end of the
// file (io.EOF), for a write io.ErrShortWrite, named call.
func (x *xfer) cut(op Op, call string) error {
	if op == OpRead {
		return io.EOF
	}
	return x.wrap(op, call, io.ErrShortWrite)
}

// checkRW rejects a negative offset, a transfer that would end past the
// largest file offset (the kernel's EINVAL, which wrap would report as a
// refusal of O_DIRECT) and one that breaks the alignment.
func (x *xfer) checkRW(op string, p []byte, off int64) error {
	switch {
	case off < 0:
		return &os.PathError{Op: op, Path: x.f.Name(), Err: ErrNegativeOffset}
	case off > math.MaxInt64-int64(len(p)):
		return &os.PathError{Op: op, Path: x.f.Name(), Err: fmt.Errorf("%d bytes at %d end past the largest file offset: %w", len(p), off, syscall.EINVAL)}
	}
	return x.align.check(op, x.f.Name(), p, off)
}

func (x *xfer) sync() error {
	t := x.begin(OpSync, 0, 0)
	calls, err := x.syncRetrying()
	x.end(t, x.syncPath(), OpSync, 0, err, calls-1)
	return err
}

// syncRetrying is sync's work; calls is the fdatasyncs it made.
func (x *xfer) syncRetrying() (calls int, _ error) {
	for retries := 0; ; calls++ {
		var err error
		if f, ok := x.injectSync(); ok {
			time.Sleep(f.Delay)
			if f.Err != 0 {
				err = f.Err
			}
		}
		if err == nil {
			err = x.fdatasync()
		}
		switch {
		case err == nil:
			return calls + 1, nil
		case !transient(err, &retries):
			return calls + 1, x.wrap(OpSync, OpSync.syscall(), err)
		}
	}
}

func (x *xfer) injectSync() (Fault, bool) {
	if x.faults == nil {
		return Fault{}, false
	}
	return x.faults.Inject(OpSync, 0, 0)
}

// wrap names the operation (as call: what the engine did) and file, and
// turns EINVAL on an aligned direct transfer into ErrNotSupported:
// overlay-on-squashfs and some FUSE filesystems accept O_DIRECT at open
// and refuse the first I/O.
func (x *xfer) wrap(op Op, call string, err error) error {
	if x.direct && op != OpSync && errors.Is(err, syscall.EINVAL) {
		err = fmt.Errorf("%w: %w", ErrNotSupported, err)
	}
	return &os.PathError{Op: call, Path: x.f.Name(), Err: err}
}
