package appender

import (
	"os"
	"path/filepath"

	"github.com/dio-storage/dio/direct"
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
	f, m, err := openFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644, o)
	if err != nil {
		return nil, err
	}
	a, err := New(newTruncFile(f), o)
	if err != nil {
		m.Close()
		f.Close()
		os.Remove(path)
		return nil, err
	}
	a.meter = m
	if !o.NoDirSync {
		var err error
		if o.DirSync != nil {
			err = o.DirSync(filepath.Dir(path))
		} else {
			err = direct.SyncDir(filepath.Dir(path), m)
		}
		if err != nil {
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
	f, m, err := openFile(path, os.O_RDWR, 0, o)
	if err != nil {
		return nil, err
	}
	a, err := Resume(newTruncFile(f), size, o)
	if err != nil {
		m.Close()
		f.Close()
		return nil, err
	}
	a.file, a.meter = f, m
	return a, nil
}

// openFile opens path by o.IO, its I/O through o.Faults when set (the
// file carries the injector, so every read, write and fdatasync on it,
// and on every queue made from it, meets the faults) and counted in a
// Meter of its own, which watches it by o.Slow.
func openFile(path string, flag int, perm os.FileMode, o Options) (fallback.File, *direct.Meter, error) {
	m, err := direct.NewMeter(&direct.MeterOptions{SyncLatency: true, Slow: o.Slow})
	if err != nil {
		return nil, nil, invalid("Slow: %v", err)
	}
	f, err := fallback.Open(path, flag, perm, o.IO)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	if o.Faults != nil {
		f = fallback.WithFaults(f, o.Faults)
	}
	return fallback.WithMeter(f, m), m, nil
}

// Stats returns the counts of the file's I/O and of the bytes the
// caller asked to write (zero for an Appender New made on a File of the
// caller's).
func (a *Appender) Stats() direct.MeterStats { return a.meter.Stats() }

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
