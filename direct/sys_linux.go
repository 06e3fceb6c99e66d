//go:build linux

package direct

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

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

// preadOnce, pwriteOnce and fdatasync make one system call each; xfer
// retries EINTR and EAGAIN, a bounded number of times.

func preadOnce(f *os.File, p []byte, off int64) (int, error) {
	n, err := unix.Pread(int(f.Fd()), p, off)
	if err != nil {
		return 0, err
	}
	return n, nil
}

func pwriteOnce(f *os.File, p []byte, off int64, flags int) (int, error) {
	if flags != 0 {
		n, err := unix.Pwritev2(int(f.Fd()), [][]byte{p}, off, flags)
		if err != nil {
			return 0, err
		}
		return n, nil
	}
	n, err := unix.Pwrite(int(f.Fd()), p, off)
	if err != nil {
		return 0, err
	}
	return n, nil
}

func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

func fallocate(f *os.File, off, n int64) error {
	for {
		err := unix.Fallocate(int(f.Fd()), 0, off, n)
		switch {
		case err == unix.EINTR:
			continue
		case errors.Is(err, unix.EOPNOTSUPP):
			return fmt.Errorf("%w: %w", errors.ErrUnsupported, err)
		}
		return err
	}
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
