//go:build unix

package pebblefs

import (
	"cmp"
	"io"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/fileio"
)

// fileWriter is what a writeFile needs of fileio's Writer; tests may
// stand in for it.
type fileWriter interface {
	io.Writer
	Sync() error
	Synced() int64
	Size() int64
	Close() error
	Fd() uintptr
}

// fileReader is what a readFile needs of fileio's Reader.
type fileReader interface {
	io.ReaderAt
	ReadAtBuffer(b *aligned.Buffer, n int, off int64) (int, error) // a prefetch's read
	Size() int64
	Close() error
	Fd() uintptr
}

// fileOptions returns the fileio Options of every file fs opens.
func (fs *FS) fileOptions() *fileio.Options {
	return &fileio.Options{
		BufferSize: fs.o.BufferSize,
		Buffers:    fs.o.Buffers,
		IO:         fs.o.IO,
		Pool:       fs.pool,
		ReadAhead:  fs.o.ReadAhead,
		Faults:     fs.o.Faults,
		Slow:       fs.o.Slow,
	}
}

// newWriter creates name, which must not exist. It leaves the
// directory's fsync to Pebble, as vfs.Default's Create does: Pebble syncs
// the directory itself before it depends on a file's name (a flush's or
// compaction's sstables and blob files before the MANIFEST names them, a
// WAL as it is created, the MANIFEST and its marker as the marker moves,
// OPTIONS after its rename), once per batch of files rather than once per
// file.
func (fs *FS) newWriter(name string) (fileWriter, error) {
	o := fs.fileOptions()
	o.NoDirSync = true
	w, err := fileio.Create(name, o)
	if err != nil {
		return nil, err
	}
	return fs.book.writer(w), nil
}

// newReader opens name to read its first size bytes (0: the whole file),
// with read-ahead when seq, as much as the budget's read-ahead holds
// (none when it is spent).
func (fs *FS) newReader(name string, size int64, seq bool) (fileReader, error) {
	o := fs.fileOptions()
	o.Size = size
	var release func()
	if seq {
		o.ReadAhead, release = fs.ahead.take(cmp.Or(fs.o.ReadAhead, seqReadAhead))
		seq = release != nil // the budget is spent: read through the pool
	}
	r, err := fileio.Open(name, o)
	if err != nil || !seq {
		if release != nil {
			release()
		}
		if err != nil {
			return nil, err
		}
		return fs.book.reader(r, r), nil
	}
	s, err := r.NewSequential(0)
	if err != nil {
		_ = r.Close()
		release()
		return nil, err
	}
	return fs.book.reader(r, sequential{Reader: r, s: s, release: release}), nil
}

// sequential is a Reader whose ReadAt reads ahead: Pebble reads a
// compaction's input with ReadAt at increasing offsets, one block after
// another, from one goroutine.
type sequential struct {
	*fileio.Reader
	s       *fileio.Sequential
	release func() // gives the read-ahead back to the budget
}

func (r sequential) ReadAt(p []byte, off int64) (int, error) { return r.s.ReadAt(p, off) }

// Close closes the Reader, which closes its Sequential, and gives the
// read-ahead back.
func (r sequential) Close() error {
	err := r.Reader.Close()
	r.release()
	return err
}
