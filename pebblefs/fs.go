//go:build unix

package pebblefs

import (
	"cmp"
	"io"
	"os"
	"sync"
	"syscall"

	"github.com/cockroachdb/errors"
	"github.com/cockroachdb/errors/oserror"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/dio-storage/dio/aligned"
)

// FS is Pebble's vfs.FS on dio. File contents go through dio's fileio;
// everything about names (directories, locks, renames, links, listings,
// disk usage) goes to vfs.Default, which does it through the kernel as
// Pebble expects.
type FS struct {
	o     Options
	live  registry
	pool  *aligned.Pool // Options.Pool, or a third of Options.Memory
	ahead aheadBudget   // the other half: sequential files' read-ahead
	fresh *freshFiles   // nil: Options.FreshFiles < 0
	book  book          // the files' counts (Stats)
}

var _ vfs.FS = (*FS)(nil)

// New returns Pebble's vfs.FS on dio; o may be nil, meaning defaults.
func New(o *Options) vfs.FS {
	fs := newFS(o)
	fs.fresh.watchMemory()
	return fs
}

// newFS is New without the fresh files' memory watcher (see
// watchMemory), which tests that set their limit start themselves.
func newFS(o *Options) *FS {
	fs := &FS{}
	if o != nil {
		fs.o = *o
	}
	fs.live.files = make(map[fileID]*writeFile)
	mem := fs.o.Memory
	if mem <= 0 {
		mem = DefaultMemory
	}
	poolBytes := mem / 3
	fs.ahead.limit = mem - poolBytes
	fs.pool = fs.o.Pool
	if fs.pool == nil {
		size := aligned.Up(cmp.Or(fs.o.BufferSize, aligned.DefaultBufferSize), poolAlign)
		// An error here (a BufferSize over the budget, an absurd one)
		// leaves each file its own buffers, and fileio refuses an absurd
		// BufferSize when Pebble creates a file.
		fs.pool, _ = aligned.NewPool(size, poolAlign, int(max(poolBytes, int64(size))))
	}
	fresh := fs.o.FreshFiles
	if fresh == 0 {
		fresh = DefaultFreshFiles()
	}
	fs.fresh = newFreshFiles(fresh)
	return fs
}

// poolAlign aligns the budget's buffers for any device dio meets: 4 KiB
// covers 512-byte and 4 KiB sectors and the page size.
const poolAlign = 4096

// forget drops the fresh bytes of the file at name, which pebblefs is
// about to remove, rename or replace; a file with other links keeps them
// on Remove, since its bytes stay.
func (fs *FS) forget(name string, evenLinked bool) {
	if fs.fresh == nil {
		return
	}
	fi, err := os.Lstat(name)
	if err != nil {
		return
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && (evenLinked || st.Nlink <= 1) {
		fs.fresh.forget(fileID{dev: uint64(st.Dev), ino: st.Ino})
	}
}

// Create removes any file at name and creates a new one, so a hard link
// to the old file (a checkpoint's sstable) never sees it change: never
// O_TRUNC, as vfs.Default.
func (fs *FS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	fs.forget(name, false)
	if err := os.Remove(name); err != nil && !oserror.IsNotExist(err) {
		return nil, errors.WithStack(err)
	}
	f, err := fs.create(name, category == flushCategory)
	if err != nil {
		return nil, err // a nil vfs.File, not one holding a nil *writeFile: Pebble closes what it gets
	}
	return f, nil
}

// flushCategory is the category Pebble creates a memtable flush's
// sstables with (its getDiskWriteCategoryForCompaction).
const flushCategory vfs.DiskWriteCategory = "pebble-memtable-flush"

// ReuseForWrite removes oldname and creates newname, as vfs.FS allows.
// Pebble recycles WAL files so that a new log overwrites blocks already
// allocated; a fresh file is correct as well, since Pebble's WAL reader
// stops at the end of the file, and dio's writer allocates ahead of its
// writes anyway (fallocate), so the block allocation recycling saves is
// off the write path either way.
func (fs *FS) ReuseForWrite(oldname, newname string, _ vfs.DiskWriteCategory) (vfs.File, error) {
	fs.forget(oldname, false)
	if err := os.Remove(oldname); err != nil {
		return nil, errors.WithStack(err)
	}
	return fs.Create(newname, vfs.WriteCategoryUnspecified)
}

// Open opens name for reading with O_DIRECT. vfs.SequentialReadsOption
// gives the handle read-ahead (Pebble's compactions open their inputs
// with it); vfs.RandomReadsOption is what dio's reads are already.
func (fs *FS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	seq := false
	var other []vfs.OpenOption
	for _, opt := range opts {
		switch opt {
		case vfs.SequentialReadsOption:
			seq = true
		case vfs.RandomReadsOption:
		default:
			other = append(other, opt)
		}
	}
	f, err := fs.open(name, seq)
	if err != nil {
		return nil, err
	}
	for _, opt := range other {
		opt.Apply(f)
	}
	return f, nil
}

// OpenReadWrite goes to vfs.Default: only Pebble's secondary cache for
// shared storage uses it, writing blocks in place with WriteAt, which an
// appending fileio Writer does not do.
func (fs *FS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return vfs.Default.OpenReadWrite(name, category, opts...)
}

// OpenDir opens a directory for syncing, through vfs.Default.
func (fs *FS) OpenDir(name string) (vfs.File, error) { return vfs.Default.OpenDir(name) }

// Link creates newname as a hard link to oldname.
func (fs *FS) Link(oldname, newname string) error { return vfs.Default.Link(oldname, newname) }

// Remove removes the named file or (empty) directory, and the file's
// fresh bytes with its last link.
func (fs *FS) Remove(name string) error {
	fs.forget(name, false)
	return vfs.Default.Remove(name)
}

// RemoveAll removes name and everything under it, fresh bytes too.
func (fs *FS) RemoveAll(name string) error {
	fs.forget(name, false)
	fs.fresh.forgetUnder(name)
	return vfs.Default.RemoveAll(name)
}

// Rename renames a file, replacing newname if it exists. Neither keeps
// fresh bytes: Pebble renames only small files (OPTIONS, markers), and a
// replaced file's bytes must not outlive it.
func (fs *FS) Rename(oldname, newname string) error {
	fs.forget(oldname, true)
	fs.forget(newname, true)
	return vfs.Default.Rename(oldname, newname)
}

// MkdirAll creates dir and its missing parents.
func (fs *FS) MkdirAll(dir string, perm os.FileMode) error { return vfs.Default.MkdirAll(dir, perm) }

// Lock takes Pebble's LOCK file, through vfs.Default.
func (fs *FS) Lock(name string) (io.Closer, error) { return vfs.Default.Lock(name) }

// List returns the names in dir.
func (fs *FS) List(dir string) ([]string, error) { return vfs.Default.List(dir) }

// Stat describes the named file. A file still open for writing here
// reports its logical size, the bytes written to it, as an os.File
// would, not what has reached the disk.
func (fs *FS) Stat(name string) (vfs.FileInfo, error) {
	fi, err := vfs.Default.Stat(name)
	if err != nil {
		return nil, err
	}
	if w := fs.live.lookup(idOf(fi)); w != nil {
		if size, ok := w.liveSize(); ok {
			return sizedInfo{FileInfo: fi, size: size}, nil
		}
	}
	return fi, nil
}

// PathBase returns the last element of path.
func (fs *FS) PathBase(path string) string { return vfs.Default.PathBase(path) }

// PathJoin joins path elements.
func (fs *FS) PathJoin(elem ...string) string { return vfs.Default.PathJoin(elem...) }

// PathDir returns all but the last element of path.
func (fs *FS) PathDir(path string) string { return vfs.Default.PathDir(path) }

// GetDiskUsage reports the disk space of the filesystem holding path.
func (fs *FS) GetDiskUsage(path string) (vfs.DiskUsage, error) {
	return vfs.Default.GetDiskUsage(path)
}

// Unwrap returns vfs.Default: the files pebblefs writes are the
// operating system's own files, so vfs.Root(fs) is vfs.Default (Pebble's
// metamorphic test reads it that way and leaves the directory alone
// when a run fails).
func (fs *FS) Unwrap() vfs.FS { return vfs.Default }

// registry finds the writer of a file that is still being written, so a
// reader of that file in this process sees what the writer holds in
// memory (Pebble's checkpoints copy the live MANIFEST and WAL).
type registry struct {
	mu    sync.Mutex
	files map[fileID]*writeFile
}

func (r *registry) add(w *writeFile) {
	r.mu.Lock()
	r.files[w.id] = w
	r.mu.Unlock()
}

func (r *registry) remove(w *writeFile) {
	r.mu.Lock()
	if r.files[w.id] == w {
		delete(r.files, w.id)
	}
	r.mu.Unlock()
}

func (r *registry) lookup(id fileID) *writeFile {
	if id == (fileID{}) {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.files[id]
}
