package direct

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// AtomicWrite returns the file's unit of untorn writes, read from statx
// STATX_WRITE_ATOMIC: zero where the kernel (before 6.11), the filesystem
// or the device offers none, and for a File over the page cache, which
// this package never writes with RWF_ATOMIC. statx is asked once per File.
func (f *File) AtomicWrite() AtomicLimits {
	l, _ := f.atomicWrite()
	return l
}

// statx is unix.Statx, a variable for a test to count the calls.
var statx = unix.Statx

// atomicWrite is AtomicWrite with statx's error: a file on a filesystem
// that has shut down fails with EIO, which WriteAtomicAt must report as
// it, not as untorn writes unsupported. The limits are read once per File
// (see atomicUnit); a closed File still fails with os.ErrClosed.
func (f *File) atomicWrite() (AtomicLimits, error) {
	if !f.direct {
		return AtomicLimits{}, nil
	}
	if f.unit != nil {
		if l := f.unit.lim.Load(); l != nil {
			if f.rc.Control(func(uintptr) {}) != nil {
				return AtomicLimits{}, os.ErrClosed
			}
			return *l, nil
		}
	}
	l, err := f.statAtomicWrite()
	if err == nil && f.unit != nil {
		f.unit.lim.Store(&l)
	}
	return l, err
}

// statAtomicWrite asks the kernel for the file's unit of untorn writes.
func (f *File) statAtomicWrite() (AtomicLimits, error) {
	var st unix.Statx_t
	var err error
	cerr := f.rc.Control(func(fd uintptr) {
		err = statx(int(fd), "", unix.AT_EMPTY_PATH, unix.STATX_WRITE_ATOMIC, &st)
	})
	switch {
	case cerr != nil:
		return AtomicLimits{}, os.ErrClosed
	case errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EINVAL):
		return AtomicLimits{}, nil // no statx, or one that knows no STATX_WRITE_ATOMIC
	case err != nil:
		return AtomicLimits{}, err
	case st.Mask&unix.STATX_WRITE_ATOMIC == 0 || st.Attributes&unix.STATX_ATTR_WRITE_ATOMIC == 0:
		return AtomicLimits{}, nil
	}
	return AtomicLimits{Min: int(st.Atomic_write_unit_min), Max: int(st.Atomic_write_unit_max)}, nil
}

// WriteAtomicAt writes all of p at off with pwritev2 RWF_ATOMIC: after a
// crash [off, off+len(p)) holds all the old bytes or all of p, never a
// mix. len(p) must be a power of two within AtomicWrite's [Min, Max], off
// a multiple of len(p), and p's address aligned as for WriteAt, or the
// error matches ErrUnaligned and nothing is written. Where the file has
// no untorn writes the error matches errors.ErrUnsupported. A write is
// never resumed: one cut short fails with io.ErrShortWrite (the kernel
// writes an untorn write whole or fails it). The unit is read with one
// statx, on the File's first call of WriteAtomicAt or AtomicWrite, and
// kept.
func (f *File) WriteAtomicAt(p []byte, off int64) (int, error) {
	const op = "pwritev2"
	lim, err := f.atomicWrite()
	switch {
	case err != nil:
		return 0, &os.PathError{Op: "statx", Path: f.Name(), Err: err}
	case !lim.Supported():
		return 0, &os.PathError{Op: op, Path: f.Name(), Err: fmt.Errorf("direct: no untorn writes (RWF_ATOMIC) on this file: %w", errors.ErrUnsupported)}
	case off < 0:
		return 0, &os.PathError{Op: op, Path: f.Name(), Err: ErrNegativeOffset}
	case !lim.fits(len(p), off):
		return 0, &os.PathError{Op: op, Path: f.Name(), Err: fmt.Errorf("%w: an untorn write of %d bytes at %d: the length must be a power of two from %d to %d and the offset a multiple of it",
			ErrUnaligned, len(p), off, lim.Min, lim.Max)}
	}
	if err := f.checkRW(op, p, off); err != nil {
		return 0, err
	}
	x := f.xfer
	x.writeFlags |= unix.RWF_ATOMIC
	t := x.begin(OpWrite, off, len(p))
	n, calls, err := x.writeAtomic(p, off)
	x.end(t, PathPwrite, OpWrite, n, err, calls-1)
	return n, err
}

// writeAtomic is WriteAtomicAt's work, on x with RWF_ATOMIC set; calls
// is the system calls it made.
func (x *xfer) writeAtomic(p []byte, off int64) (n, calls int, err error) {
	const op = "pwritev2"
	for retries := 0; ; {
		n, err := x.once(OpWrite, p, off)
		calls++
		switch {
		case err != nil && transient(err, &retries):
			continue
		case errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EOPNOTSUPP):
			// The unit's rules were kept: the kernel refuses RWF_ATOMIC
			// itself (a filesystem that reports a unit it cannot honour
			// for this range, such as one crossing an extent boundary it
			// cannot write at once).
			return 0, calls, &os.PathError{Op: op, Path: x.f.Name(), Err: fmt.Errorf("direct: RWF_ATOMIC refused: %w: %w", errors.ErrUnsupported, err)}
		case err != nil:
			return n, calls, &os.PathError{Op: op, Path: x.f.Name(), Err: err}
		case n < len(p):
			return n, calls, &os.PathError{Op: op, Path: x.f.Name(), Err: io.ErrShortWrite}
		}
		return n, calls, nil
	}
}
