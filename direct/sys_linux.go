//go:build linux

package direct

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/ncw/directio"
	"golang.org/x/sys/unix"
)

func openDirect(name string, flag int, perm os.FileMode) (*os.File, error) {
	return directio.OpenFile(name, flag, perm) // adds O_DIRECT
}

// discover finds f's direct-I/O alignment: statx STATX_DIOALIGN, then the
// logical block size of the block device under the filesystem, then
// DefaultAlignment. statx reports 0 where the filesystem does not say
// (tmpfs, btrfs): that means unknown, not unsupported.
func discover(f *os.File) (Alignment, Source) {
	fd := int(f.Fd())
	var stx unix.Statx_t
	err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN, &stx)
	if err == nil && stx.Mask&unix.STATX_DIOALIGN != 0 && stx.Dio_offset_align != 0 && stx.Dio_mem_align != 0 {
		return Alignment{Memory: int(stx.Dio_mem_align), Offset: int(stx.Dio_offset_align)}, SourceStatx
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil {
		if dev, ok := blockDevice(st.Dev); ok && dev.Logical > 0 {
			return Alignment{Memory: dev.Logical, Offset: dev.Logical}, SourceBlockDevice
		}
	}
	return Alignment{Memory: DefaultAlignment, Offset: DefaultAlignment}, SourceDefault
}

// BlockDevice describes the block device under a filesystem.
type BlockDevice struct {
	Name     string // kernel name, for example "loop0" or "vda"
	Logical  int    // logical block size: the smallest direct I/O unit
	Physical int    // physical block size: the unit the device writes without read-modify-write
}

// BlockDeviceOf returns the block device that holds path's filesystem, and
// false for filesystems without one (tmpfs, ramfs, btrfs's anonymous
// devices, network filesystems).
func BlockDeviceOf(path string) (BlockDevice, bool) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return BlockDevice{}, false
	}
	return blockDevice(st.Dev)
}

func blockDevice(dev uint64) (BlockDevice, bool) {
	dir := fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(dev), unix.Minor(dev))
	real, err := os.Readlink(dir)
	if err != nil {
		return BlockDevice{}, false
	}
	d := BlockDevice{Name: real[strings.LastIndexByte(real, '/')+1:]}
	for _, q := range []string{dir + "/queue", dir + "/../queue"} { // a partition's queue is its disk's
		if d.Logical = readInt(q + "/logical_block_size"); d.Logical > 0 {
			d.Physical = readInt(q + "/physical_block_size")
			return d, true
		}
	}
	return BlockDevice{}, false
}

func readInt(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// preadOnce, pwriteOnce and fdatasync make one system call each, inside
// RawConn.Control (see xfer); xfer retries EINTR and EAGAIN, a bounded
// number of times. A closed file fails with os.ErrClosed.

func (x *xfer) preadOnce(p []byte, off int64) (int, error) {
	return x.control(OpRead, p, off)
}

func (x *xfer) pwriteOnce(p []byte, off int64) (int, error) {
	return x.control(OpWrite, p, off)
}

func (x *xfer) fdatasync() error {
	_, err := x.control(OpSync, nil, 0)
	return err
}

// sysCall is one system call run inside RawConn.Control. Its run field is
// its own method value, made once, so that a pooled sysCall costs no
// allocation per call, as a closure handed to Control would.
type sysCall struct {
	op    Op
	p     []byte
	off   int64
	flags int
	n     int
	err   error
	run   func(fd uintptr)
}

var sysCalls = sync.Pool{New: func() any {
	c := new(sysCall)
	c.run = c.do
	return c
}}

func (c *sysCall) do(fd uintptr) {
	switch c.op {
	case OpRead:
		c.n, c.err = unix.Pread(int(fd), c.p, c.off)
	case OpWrite:
		if c.flags != 0 {
			c.n, c.err = unix.Pwritev2(int(fd), [][]byte{c.p}, c.off, c.flags)
		} else {
			c.n, c.err = unix.Pwrite(int(fd), c.p, c.off)
		}
	case OpSync:
		c.err = unix.Fdatasync(int(fd))
	}
	if c.err != nil {
		c.n = 0
	}
}

func (x *xfer) control(op Op, p []byte, off int64) (int, error) {
	c := sysCalls.Get().(*sysCall)
	c.op, c.p, c.off, c.flags = op, p, off, x.writeFlags
	err := x.rc.Control(c.run)
	n, cerr := c.n, c.err
	*c = sysCall{run: c.run}
	sysCalls.Put(c)
	if err != nil {
		return 0, os.ErrClosed // Control fails only on a closed file
	}
	return n, cerr
}

func (f *File) fallocate(off, n int64) error {
	var err error
	cerr := f.rc.Control(func(fd uintptr) {
		for {
			err = unix.Fallocate(int(fd), 0, off, n)
			if err != unix.EINTR {
				return
			}
		}
	})
	switch {
	case cerr != nil:
		return os.ErrClosed
	case errors.Is(err, unix.EOPNOTSUPP):
		return fmt.Errorf("%w: %w", errors.ErrUnsupported, err)
	}
	return err
}

var fsNames = map[int64]string{
	unix.TMPFS_MAGIC:           "tmpfs",
	unix.RAMFS_MAGIC:           "ramfs",
	unix.EXT4_SUPER_MAGIC:      "ext4", // ext2 and ext3 share the magic
	unix.XFS_SUPER_MAGIC:       "xfs",
	unix.BTRFS_SUPER_MAGIC:     "btrfs",
	unix.OVERLAYFS_SUPER_MAGIC: "overlay",
	unix.SQUASHFS_MAGIC:        "squashfs",
	unix.NFS_SUPER_MAGIC:       "nfs",
	unix.FUSE_SUPER_MAGIC:      "fuse",
	unix.V9FS_MAGIC:            "9p",
	unix.F2FS_SUPER_MAGIC:      "f2fs",
	0x2fc12fc1:                 "zfs",      // ZFS_SUPER_MAGIC, not in the kernel headers
	0xca451a4e:                 "bcachefs", // BCACHEFS_SUPER_MAGIC
}

// Filesystem returns the name of the filesystem holding path ("ext4",
// "xfs", "tmpfs", ...), or its magic number in hex when the name is not
// known.
func Filesystem(path string) (string, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return "", &os.PathError{Op: "statfs", Path: path, Err: err}
	}
	if name, ok := fsNames[int64(st.Type)]; ok {
		return name, nil
	}
	return fmt.Sprintf("%#x", st.Type), nil
}
