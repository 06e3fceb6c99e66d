package appender

import (
	"os"
	"path/filepath"

	"github.com/dio-storage/dio/fallback"
)

// Create creates the file at path (failing if it exists) by o.IO, with
// o.Faults under it, and returns an Appender writing to it from offset 0.
// Unless o.NoDirSync it fsyncs the directory (o.DirSync), so that the
// file outlives a power cut once a Sync has returned. Options that
// Validate or New refuse give an error matching ErrInvalid; a Create
// that fails leaves no file.
func Create(path string, o Options) (*Appender, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	f, err := openFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644, o)
	if err != nil {
		return nil, err
	}
	a, err := New(newTruncFile(f), o)
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	if !o.NoDirSync {
		sync := o.DirSync
		if sync == nil {
			sync = SyncDir
		}
		if err := sync(filepath.Dir(path)); err != nil {
			a.Discard()
			os.Remove(path)
			return nil, err
		}
	}
	a.file = f
	return a, nil
}

// OpenAppend opens the file at path to append to it from size, a logical
// size made durable before (see Resume): a size below zero or past the
// file's end gives an error matching ErrInvalid and leaves the file as
// it was; a missing file, one matching fs.ErrNotExist.
func OpenAppend(path string, size int64, o Options) (*Appender, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if size < 0 {
		return nil, invalid("size %d is negative", size)
	}
	f, err := openFile(path, os.O_RDWR, 0, o)
	if err != nil {
		return nil, err
	}
	a, err := Resume(newTruncFile(f), size, o)
	if err != nil {
		f.Close()
		return nil, err
	}
	a.file = f
	return a, nil
}

// openFile opens path by o.IO, its I/O through o.Faults when set: the file
// carries the injector, so every read, write and fdatasync on it, and on
// every queue made from it, meets the faults.
func openFile(path string, flag int, perm os.FileMode, o Options) (fallback.File, error) {
	f, err := fallback.Open(path, flag, perm, o.IO)
	if err != nil || o.Faults == nil {
		return f, err
	}
	return fallback.WithFaults(f, o.Faults), nil
}

// Mode reports the I/O path of the file the Appender writes.
func (a *Appender) Mode() fallback.Mode { return a.f.Mode() }

// Fd returns the descriptor of the file Create or OpenAppend opened, for
// advice to the kernel (posix_fadvise, fstat) and nothing else; 0 for
// an Appender New made on a File of the caller's.
func (a *Appender) Fd() uintptr {
	if a.file == nil {
		return 0
	}
	return a.file.Fd()
}
