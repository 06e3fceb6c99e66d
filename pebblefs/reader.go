//go:build unix

package pebblefs

import (
	"io"
	"io/fs"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/errors"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// readFile is a file Pebble opens for reading: an sstable or blob file
// read at random by many goroutines at once, a compaction's input read
// in order (seq), a MANIFEST or WAL replayed through Read.
type readFile struct {
	fs   *FS
	name string
	info vfs.FileInfo
	seq  bool

	// live is the writer of this file while it is still open for writing
	// here; reads past what that writer has synced catch up with it first.
	live atomic.Pointer[writeFile]

	// fresh holds the file's bytes in memory when pebblefs wrote it
	// recently or, for point reads, fills as they miss
	// (Options.FreshFiles); reads are served from it while it lasts.
	// A point reader's file that has none, or lost it (dropped while
	// the store outgrew the fresh files' limit), attaches again when
	// a read misses and the store fits (see fromFresh): reattach.
	fresh    atomic.Pointer[freshFile]
	reattach bool

	pre prefetcher // Prefetch's read ahead

	// mu guards r and size: readers share it, a catch-up that reopens r
	// over a longer prefix takes it alone.
	mu   sync.RWMutex
	r    fileReader // nil while size is 0: nothing to read
	size int64      // bytes readers may see

	posMu sync.Mutex
	pos   int64 // Read's offset

	closed atomic.Bool
}

var _ vfs.File = (*readFile)(nil)

func (fs *FS) open(name string, seq bool) (*readFile, error) {
	info, err := vfs.Default.Stat(name)
	if err != nil {
		return nil, err
	}
	if w := fs.live.lookup(idOf(info)); w != nil {
		return fs.openLive(name, w, seq)
	}
	// A fresh file is read from memory: its handle needs no read-ahead.
	fresh := fs.fresh.attach(idOf(info), name, info.Size(), info.ModTime(), seq)
	r, err := fs.newReader(name, 0, seq && fresh == nil)
	if err != nil {
		return nil, errors.WithStack(err)
	}
	f := &readFile{fs: fs, name: name, info: info, seq: seq, r: r, size: r.Size(),
		reattach: fs.fresh != nil && !seq && keeps(name) && idOf(info) != (fileID{})}
	f.fresh.Store(fresh)
	return f, nil
}

// openLive opens a file that w is still writing. The reader starts with
// the prefix w has made durable, which is on disk; anything further is
// synced when a read asks for it.
func (fs *FS) openLive(name string, w *writeFile, seq bool) (*readFile, error) {
	f := &readFile{fs: fs, name: name, info: w.info, seq: seq}
	f.live.Store(w)
	if err := f.catchUp(0); err != nil {
		return nil, err
	}
	return f, nil
}

// catchUp makes the first end bytes readable, or as many as the writer
// has, syncing the writer when they are not on disk yet. Once the writer
// has closed, the file on disk is complete and is read whole.
func (f *readFile) catchUp(end int64) error {
	w := f.live.Load()
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	size, final := int64(0), w.closed
	if !final {
		if end > w.w.Synced() && w.w.Synced() < w.w.Size() {
			if err := w.w.Sync(); err != nil {
				return err
			}
		}
		size = w.w.Synced()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed.Load() { // Close ran meanwhile: open nothing it would not close
		return fs.ErrClosed
	}
	if final {
		f.live.Store(nil)
	} else if size <= f.size {
		return nil
	}
	var r fileReader
	if final || size > 0 {
		var err error
		if r, err = f.fs.newReader(f.name, size, f.seq); err != nil {
			return errors.WithStack(err)
		}
		size = r.Size()
	}
	if f.r != nil {
		_ = f.r.Close()
	}
	f.r, f.size = r, size
	return nil
}

// ReadAt reads len(p) bytes at off, from any number of goroutines at
// once. It returns io.EOF when the file ends first.
func (f *readFile) ReadAt(p []byte, off int64) (int, error) {
	if f.closed.Load() {
		return 0, fs.ErrClosed
	}
	if off < 0 {
		return 0, errors.Newf("pebblefs: read of %s at negative offset %d", f.name, off)
	}
	if f.live.Load() != nil {
		if err := f.catchUp(off + int64(len(p))); err != nil {
			return 0, err
		}
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed.Load() {
		return 0, fs.ErrClosed
	}
	if off >= f.size {
		return 0, io.EOF
	}
	want := p
	if rest := f.size - off; int64(len(p)) > rest {
		want = p[:rest]
	}
	if f.fromFresh(want, off) {
		f.fs.book.fresh(len(want))
		if len(want) < len(p) {
			return len(want), io.EOF
		}
		return len(want), nil
	}
	if f.fromPrefetch(want, off) {
		if len(want) < len(p) {
			return len(want), io.EOF
		}
		return len(want), nil
	}
	n, err := f.r.ReadAt(want, off)
	if err == nil && n < len(p) {
		err = io.EOF
	}
	return n, err
}

// fromFresh copies len(p) bytes at off into p from the fresh files, the
// file's bytes there or chunks filled into them from the disk; false
// when the caller must read the device. A point reader whose file has
// no fresh bytes, or whose fresh bytes were dropped, attaches again
// while the store fits the limit: a file dropped during a compaction
// that briefly took the store past it, or while the fresh files gave
// way to the memory cgroup, is read from memory again once they have
// room, as a page cache would refill it. f.mu is held (read).
func (f *readFile) fromFresh(p []byte, off int64) bool {
	c := f.fs.fresh
	ff := f.fresh.Load()
	if ff != nil && (c.readAt(ff, p, off) || c.fill(ff, f.r, p, off)) {
		return true
	}
	if !f.reattach || !c.fills() || ff != nil && !ff.gone() {
		return false
	}
	nf := c.reattach(idOf(f.info), f.name, f.info.Size(), f.info.ModTime())
	if nf == nil || !f.fresh.CompareAndSwap(ff, nf) {
		return false
	}
	return c.readAt(nf, p, off) || c.fill(nf, f.r, p, off)
}

// Read reads from the file's current offset, as os.File does.
func (f *readFile) Read(p []byte) (int, error) {
	f.posMu.Lock()
	defer f.posMu.Unlock()
	if len(p) == 0 {
		return 0, nil
	}
	n, err := f.ReadAt(p, f.pos)
	f.pos += int64(n)
	if n > 0 && err == io.EOF {
		err = nil
	}
	return n, err
}

// Stat describes the file; a file still being written here has the
// size its writer was given.
func (f *readFile) Stat() (vfs.FileInfo, error) {
	if f.closed.Load() {
		return nil, fs.ErrClosed
	}
	if w := f.live.Load(); w != nil {
		if size, ok := w.liveSize(); ok {
			return sizedInfo{FileInfo: f.info, size: size}, nil
		}
		if err := f.catchUp(0); err != nil {
			return nil, err
		}
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return sizedInfo{FileInfo: f.info, size: f.size}, nil
}

// Fd returns the descriptor reads use, or vfs.InvalidFd while the file
// has nothing to read.
func (f *readFile) Fd() uintptr {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.r == nil {
		return vfs.InvalidFd
	}
	return f.r.Fd()
}

// Preallocate does nothing on a file open for reading.
func (f *readFile) Preallocate(int64, int64) error { return nil }

// Write is not supported on a file opened for reading.
func (f *readFile) Write([]byte) (int, error) {
	return 0, errors.Wrapf(vfs.ErrUnsupported, "pebblefs: write to %s, open for reading", f.name)
}

// WriteAt is not supported on a file opened for reading.
func (f *readFile) WriteAt([]byte, int64) (int, error) {
	return 0, errors.Wrapf(vfs.ErrUnsupported, "pebblefs: write to %s, open for reading", f.name)
}

// Sync does nothing: there is nothing to write.
func (f *readFile) Sync() error { return nil }

// SyncData does nothing: there is nothing to write.
func (f *readFile) SyncData() error { return nil }

// SyncTo does nothing: there is nothing to write.
func (f *readFile) SyncTo(int64) (bool, error) { return false, nil }

// Close releases the file's descriptor and buffers.
func (f *readFile) Close() error {
	if f.closed.Swap(true) {
		return fs.ErrClosed
	}
	f.pre.close() // before f.mu: its read holds f.mu shared
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.r == nil {
		return nil
	}
	err := f.r.Close()
	f.r, f.size = nil, 0
	return err
}
