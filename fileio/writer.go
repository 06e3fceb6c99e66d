package fileio

import (
	"fmt"
	"runtime"

	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/appender"
)

// A Writer appends bytes to a new file (Create) or to an existing one
// (OpenAppend) through aligned buffers: Write copies into the buffer
// being filled and hands full ones to the device, merged into large
// writes, while the caller goes on filling the next; the caller's slice
// is never handed to the kernel. A Writer is not safe for concurrent use.
//
// Close is owed: a Writer dropped without it is released by a cleanup
// when the garbage collector finds it unreachable, as an os.File is (its
// descriptor closed, its buffers freed or returned to their Pool, its
// writes in flight awaited), but nothing it buffered is written, nothing
// is synced, and the file is not cut back to its logical size. Only what
// the last Sync made durable (Synced) is sure to be there.
type Writer struct {
	ap      *appender.Appender
	closed  bool
	cleanup runtime.Cleanup // releases an unclosed Writer's resources; stopped by Close
}

// Create creates the file at path (failing if it exists) and returns a
// Writer that appends to it. It fsyncs the directory (unless
// Options.NoDirSync), so that the file outlives a power cut once a Sync
// has returned. Options it refuses (among them a non-zero Size, which is
// Open's) give an error matching ErrInvalidOptions; a Create that fails
// leaves no file.
func Create(path string, o *Options) (*Writer, error) {
	return create(path, o, nil)
}

// create is Create with the directory's fsync as a parameter, for a test
// to count (nil: appender.SyncDir).
func create(path string, o *Options, dirSync func(dir string) error) (*Writer, error) {
	opts := o.get()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.Size != 0 {
		return nil, fmt.Errorf("%w: Size %d is for Open: a new file's size is what is written to it", ErrInvalidOptions, opts.Size)
	}
	ao := opts.appender()
	ao.DirSync = dirSync
	ap, err := appender.Create(path, ao)
	if err != nil {
		return nil, appender.WrapInvalid(err, ErrInvalidOptions)
	}
	return newWriter(ap), nil
}

// OpenAppend opens the file at path to append to it from size, a logical
// size made durable before: the Synced a service recorded before a
// crash, or the file's size after a Close. It cuts off what the file
// holds past size (bytes written after the last Sync, the zeros grown
// ahead), reads the unaligned last block back into the first buffer, as
// Sync keeps it, and returns a Writer whose Size and Synced start at
// size. A size below zero or past the file's end gives an error matching
// ErrInvalidOptions and leaves the file as it was; a missing file, one
// matching fs.ErrNotExist. Options.Size is ignored.
func OpenAppend(path string, size int64, o *Options) (*Writer, error) {
	opts := o.get()
	opts.Size = 0
	if err := opts.validate(); err != nil {
		return nil, err
	}
	ap, err := appender.OpenAppend(path, size, opts.appender())
	if err != nil {
		return nil, appender.WrapInvalid(err, ErrInvalidOptions)
	}
	return newWriter(ap), nil
}

// newWriter returns a Writer over ap with its safety net attached. The
// cleanup refers to ap, not to the Writer, or the Writer would never be
// unreachable.
func newWriter(ap *appender.Appender) *Writer {
	w := &Writer{ap: ap}
	w.cleanup = runtime.AddCleanup(w, func(ap *appender.Appender) { ap.Discard() }, ap)
	return w
}

// Write appends p, whatever its length, and returns len(p) unless an
// I/O error stops it. It waits for the device only when every buffer is
// in flight. After ENOSPC, EDQUOT or EIO the Writer keeps every byte it
// acknowledged and the next Write, Sync or Close writes them again (see
// the package doc); after any other I/O error every Write and Sync
// returns that error. What an earlier Sync acknowledged stays in the file.
func (w *Writer) Write(p []byte) (int, error) {
	if w.closed {
		return 0, ErrClosed
	}
	n, err := w.ap.Write(p)
	// w must outlive the appender's work: its cleanup releases the
	// appender once w is unreachable, which could be mid-call.
	runtime.KeepAlive(w)
	return n, err
}

// Sync makes every byte written so far durable: it writes the buffered
// tail padded to the file's alignment (the next write rewrites that
// block) and fdatasyncs. When it returns nil, Synced is Size. With
// O_DIRECT the file may stay longer than Size, grown ahead of the writes,
// zeros past the data, until Close cuts it back: a Reader opened
// meanwhile reads with Options.Size set to Synced.
func (w *Writer) Sync() error {
	if w.closed {
		return ErrClosed
	}
	err := w.ap.Sync()
	runtime.KeepAlive(w) // as in Write
	return err
}

// Synced returns the logical size made durable by the last successful
// Sync or Close: after a crash the file holds these bytes intact, then an
// unspecified tail. A service records it to reopen the file with
// Options.Size, or to go on writing with OpenAppend. A Close with NoSync
// makes nothing durable and leaves it as it was. Synced is still valid
// after Close.
func (w *Writer) Synced() int64 { return w.ap.Synced() }

// Size returns the number of bytes written: the file's logical size, and
// the offset the next Write lands at.
func (w *Writer) Size() int64 { return w.ap.Size() }

// Mode reports the I/O path the Writer uses.
func (w *Writer) Mode() fallback.Mode { return w.ap.Mode() }

// Fd returns the file's descriptor, for advice to the kernel
// (posix_fadvise, fstat) and nothing else: the bytes go through the
// Writer's buffers, and a write or truncate beside them breaks the file.
// It is valid until Close, and another file may get the number after
// it.
func (w *Writer) Fd() uintptr { return w.ap.Fd() }

// Close writes the buffered tail, truncates the file to Size, fdatasyncs
// (unless Options.NoSync), the truncate included, and closes it: once it
// returns nil, both the bytes and the size are durable, and the file ends
// where the last byte written does (an engine reading its footer from
// the end finds it). A Close that fails leaves the file cut back to
// Synced. Every method called after Close returns ErrClosed.
func (w *Writer) Close() error {
	if w.closed {
		return ErrClosed
	}
	w.closed = true
	w.cleanup.Stop()
	return w.ap.Close()
}
