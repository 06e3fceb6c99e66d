//go:build unix

package pebblefs

import (
	"io/fs"
	"sync"

	"github.com/cockroachdb/errors"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// writeFile is a file Pebble creates: a WAL, an sstable, a blob file, a
// MANIFEST, an OPTIONS file. Writes go into a fileio Writer's aligned
// buffers and reach the disk with O_DIRECT as whole buffers, Sync writes
// the padded tail and fdatasyncs.
type writeFile struct {
	fs   *FS
	name string
	id   fileID
	info vfs.FileInfo // as created; Stat replaces its size

	// mu serialises the writer between Pebble's writing goroutine and a
	// reader of the same file catching up (readFile.catchUp), and guards
	// closed.
	mu     sync.Mutex
	w      fileWriter
	closed bool
	fresh  *freshFile // its bytes kept in memory (Options.FreshFiles), or nil
}

var _ vfs.File = (*writeFile)(nil)

// create creates name, written by a memtable flush when flush.
func (fs *FS) create(name string, flush bool) (*writeFile, error) {
	w, err := fs.newWriter(name)
	if err != nil {
		return nil, errors.WithStack(err)
	}
	info, err := vfs.Default.Stat(name)
	if err != nil {
		_ = w.Close()
		return nil, err
	}
	f := &writeFile{fs: fs, name: name, id: idOf(info), info: info, w: w}
	f.fresh = fs.fresh.start(f.id, name, flush)
	fs.live.add(f)
	return f, nil
}

// Write appends p. Pebble writes any size: 4 KiB from the sstable
// writer's bufio, the rest of a 32 KiB block from the WAL.
func (f *writeFile) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, fs.ErrClosed
	}
	n, err := f.w.Write(p)
	if f.fresh != nil {
		if err != nil {
			f.fs.fresh.drop(f.fresh)
			f.fresh = nil
		} else {
			f.fs.fresh.write(f.fresh, p[:n])
		}
	}
	return n, err
}

// Sync makes everything written durable.
func (f *writeFile) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return fs.ErrClosed
	}
	return f.w.Sync()
}

// SyncData is Sync: fileio's Sync is an fdatasync.
func (f *writeFile) SyncData() error { return f.Sync() }

// SyncTo returns fullSync false without waiting: the Writer already
// writes every full buffer as soon as it fills, so the prefix Pebble asks
// for is on its way to the disk (vfs.File lets SyncTo promise nothing
// more); Pebble's Sync at the end of the file is what makes it durable.
func (f *writeFile) SyncTo(int64) (fullSync bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false, fs.ErrClosed
	}
	return false, nil
}

// Preallocate reserves blocks without changing the file's size, as
// vfs.Default does, so the WAL's fdatasync has no block allocation to
// journal (see preallocate).
func (f *writeFile) Preallocate(off, length int64) error {
	fd := f.Fd()
	if fd == vfs.InvalidFd || length <= 0 {
		return nil
	}
	return preallocate(fd, off, length)
}

// Stat describes the file with its logical size, the bytes written so
// far.
func (f *writeFile) Stat() (vfs.FileInfo, error) {
	size, ok := f.liveSize()
	if !ok {
		return nil, fs.ErrClosed
	}
	return sizedInfo{FileInfo: f.info, size: size}, nil
}

// liveSize returns the bytes written, and false once the file is closed.
func (f *writeFile) liveSize() (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, false
	}
	return f.w.Size(), true
}

// Fd returns the file's descriptor, opened with O_DIRECT where the
// filesystem takes it.
func (f *writeFile) Fd() uintptr { return f.w.Fd() }

// Prefetch does nothing: Pebble never reads ahead a file it is writing.
func (f *writeFile) Prefetch(int64, int64) error { return nil }

// Read is not supported: Pebble reads what it wrote through Open.
func (f *writeFile) Read([]byte) (int, error) {
	return 0, errors.Wrapf(vfs.ErrUnsupported, "pebblefs: read from %s, open for writing", f.name)
}

// ReadAt reads what was written so far, including what the Writer still
// holds in memory (it is synced first).
func (f *writeFile) ReadAt(p []byte, off int64) (int, error) {
	r, err := f.fs.openLive(f.name, f, false)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	return r.ReadAt(p, off)
}

// WriteAt is not supported: fileio's Writer appends. Only files opened
// with OpenReadWrite (vfs.Default's) take it.
func (f *writeFile) WriteAt([]byte, int64) (int, error) {
	return 0, errors.Wrapf(vfs.ErrUnsupported, "pebblefs: WriteAt on %s, an appending file", f.name)
}

// Close writes the tail, truncates the file to its logical size,
// fdatasyncs and closes it.
func (f *writeFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return fs.ErrClosed
	}
	f.closed = true
	f.fs.live.remove(f)
	size := f.w.Size()
	err := f.w.Close()
	if f.fresh != nil {
		// Served only from here on, and only while the file on disk is
		// this one: same inode, size and modification time.
		fi, serr := vfs.Default.Stat(f.name)
		if err != nil || serr != nil || idOf(fi) != f.id || fi.Size() != size {
			f.fs.fresh.drop(f.fresh)
		} else {
			f.fs.fresh.finish(f.fresh, size, fi.ModTime())
		}
		f.fresh = nil
	}
	return err
}
