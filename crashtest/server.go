//go:build linux

package crashtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// A server is the FUSE filesystem the harness's disks live in: a directory
// of files, each one disk image held in memory (a diskFile), on which a
// loop device is attached.
type server struct {
	dir  string // where it is mounted
	root *fs.Inode
	fuse *fuse.Server

	mu    sync.Mutex
	files int
}

func startServer(dir string) (*server, error) {
	s := &server{dir: dir, root: &fs.Inode{}}
	timeout := time.Hour // nothing but the server changes the files
	srv, err := fs.Mount(dir, s.root, &fs.Options{
		EntryTimeout: &timeout,
		AttrTimeout:  &timeout,
		MountOptions: fuse.MountOptions{
			// Root may mount without fusermount; where the
			// syscall fails, go-fuse falls back to it.
			DirectMount:   true,
			FsName:        "dio-crashtest",
			Name:          "dio-crashtest",
			DisableXAttrs: true,
			// Writes come from the loop driver one bio segment at
			// a time; 512 KiB lets large ones through whole (go-fuse splices
			// reads up to a pipe's 1 MiB).
			MaxWrite: 512 << 10,
		},
	})
	if err != nil {
		return nil, err
	}
	s.fuse = srv
	return s, nil
}

// add makes a new disk file in the server and returns it with its path.
func (s *server) add(size int64, sector int) (*diskFile, string, error) {
	s.mu.Lock()
	s.files++
	name := fmt.Sprintf("disk%d", s.files)
	s.mu.Unlock()
	d := &diskFile{size: size, sector: int64(sector), img: newImage(size, nil, nil)}
	ctx := context.Background()
	ch := s.root.NewPersistentInode(ctx, d, fs.StableAttr{Mode: syscall.S_IFREG})
	if !s.root.AddChild(name, ch, false) {
		return nil, "", fmt.Errorf("crashtest: adding %s to the disk server", name)
	}
	return d, filepath.Join(s.dir, name), nil
}

func (s *server) close() error {
	if s.fuse == nil {
		return nil
	}
	err := s.fuse.Unmount()
	if err != nil {
		// A file still open there (a loop device not yet gone):
		// detach the mount; the server ends with its last user.
		err = unix.Unmount(s.dir, unix.MNT_DETACH)
	}
	s.fuse = nil
	return err
}

// A diskFile is one disk: its image, the log of what was written to it
// while recording, and the faults it is told to return.
type diskFile struct {
	fs.Inode
	size   int64
	sector int64

	mu     sync.Mutex
	img    *image
	log    *recording // nil: not recording
	faults faults
	stats  IOCounts
}

// IOCounts count the requests a disk served.
type IOCounts struct {
	Reads, Writes, Flushes, ReadErrors, WriteErrors, FlushErrors int64
	ReadBytes, WriteBytes                                        int64
}

var (
	_ fs.NodeOpener    = (*diskFile)(nil)
	_ fs.NodeReader    = (*diskFile)(nil)
	_ fs.NodeWriter    = (*diskFile)(nil)
	_ fs.NodeFsyncer   = (*diskFile)(nil)
	_ fs.NodeFlusher   = (*diskFile)(nil)
	_ fs.NodeGetattrer = (*diskFile)(nil)
	_ fs.NodeSetattrer = (*diskFile)(nil)
	_ fs.NodeAllocater = (*diskFile)(nil)
)

// Open serves the file with FOPEN_DIRECT_IO: the kernel keeps no page
// cache for it, so that every read and write of the loop device reaches
// the server (a cached read would hide a bad sector, a cached write the
// order of the writes).
func (d *diskFile) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, fuse.FOPEN_DIRECT_IO, 0
}

func (d *diskFile) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o600
	out.Size = uint64(d.size)
	out.Blocks = uint64(d.size / 512)
	out.Blksize = pageSize
	return 0
}

// Setattr changes nothing: a disk keeps its size.
func (d *diskFile) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return d.Getattr(ctx, f, out)
}

func (d *diskFile) Flush(ctx context.Context, f fs.FileHandle) syscall.Errno { return 0 }

func (d *diskFile) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if off >= d.size {
		return fuse.ReadResultData(nil), 0
	}
	dest = dest[:min(int64(len(dest)), d.size-off)]
	d.mu.Lock()
	d.stats.Reads++
	if d.faults.readFails(off, int64(len(dest))) {
		d.stats.ReadErrors++
		d.mu.Unlock()
		return nil, syscall.EIO
	}
	d.stats.ReadBytes += int64(len(dest))
	img := d.img
	d.mu.Unlock()
	img.readAt(dest, off)
	return fuse.ReadResultData(dest), 0
}

func (d *diskFile) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if off+int64(len(data)) > d.size {
		return 0, syscall.ENOSPC
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats.Writes++
	if d.faults.writeFails(off, int64(len(data))) {
		d.stats.WriteErrors++
		return 0, syscall.EIO
	}
	d.stats.WriteBytes += int64(len(data))
	d.faults.rewritten(off, int64(len(data)), d.sector)
	if d.log != nil {
		d.log.write(off, data)
	}
	d.img.writeAt(data, len(data), off)
	return uint32(len(data)), 0
}

// Allocate serves the loop driver's discards and write-zeroes (a hole
// punched, a range zeroed) as a write of zeros; a plain allocation
// changes nothing on a disk.
func (d *diskFile) Allocate(ctx context.Context, f fs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	if mode&(unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_ZERO_RANGE) == 0 {
		return 0
	}
	o, n := int64(off), int64(size)
	if o >= d.size {
		return 0
	}
	n = min(n, d.size-o)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats.Writes++
	if d.faults.writeFails(o, n) {
		d.stats.WriteErrors++
		return syscall.EIO
	}
	d.faults.rewritten(o, n, d.sector)
	if d.log != nil {
		d.log.zero(o, n)
	}
	d.img.writeAt(nil, int(n), o)
	return 0
}

// Fsync is the disk's flush: the loop driver turns a flush request
// (REQ_PREFLUSH, or FUA on a device without it) into an fsync of its file.
func (d *diskFile) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats.Flushes++
	if d.faults.flushFails() {
		d.stats.FlushErrors++
		return syscall.EIO
	}
	if d.log != nil {
		d.log.flush()
	}
	return 0
}

// serve replaces the image the disk serves.
func (d *diskFile) serve(img *image) {
	d.mu.Lock()
	d.img = img
	d.faults = faults{}
	d.mu.Unlock()
}

// kill makes the disk fail every request until it serves a new image.
func (d *diskFile) kill() {
	d.mu.Lock()
	d.faults.dead = true
	d.mu.Unlock()
}

// startRecording logs every write and flush from now on, and returns the
// disk as it is now, where the recording starts.
func (d *diskFile) startRecording() (*recording, pages) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.log = &recording{}
	return d.log, d.img.pages()
}

func (d *diskFile) stopRecording() {
	d.mu.Lock()
	d.log = nil
	d.mu.Unlock()
}

func (d *diskFile) counts() IOCounts {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// openFile opens path for the loop driver: not O_DIRECT, so that the loop
// device's own direct I/O stays off and its flushes become fsyncs.
func openFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR, 0)
}
