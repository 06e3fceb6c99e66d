package fallback

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"

	"github.com/dio-storage/dio/direct"
)

// rwfDontCache is RWF_DONTCACHE (include/uapi/linux/fs.h, Linux 6.14): a
// buffered write whose pages are written back and dropped from the page
// cache as soon as the write completes. Older kernels and filesystems
// without FOP_DONTCACHE (btrfs, tmpfs, ramfs here) refuse it with
// EOPNOTSUPP.
const rwfDontCache = unix.RWF_DONTCACHE

// maxRetries bounds the retries of the probe's read when it keeps failing
// with EINTR or EAGAIN, as direct's transfers do.
const maxRetries = 100

// errNotProbed is why a write-only file that holds data gets the plain
// page cache: the probe can neither write to it harmlessly nor read.
var errNotProbed = errors.New("not probed on a write-only file that holds data")

// probeDontCache finds out whether the file takes RWF_DONTCACHE. An empty
// writable file gets a real 1-byte uncached write, through the same
// direct.File write path as the file's writes, cut off again; a file with
// data gets a 1-byte uncached read instead, which the kernel checks the
// same way (kiocb_set_rw_flags refuses the flag for both directions where
// the filesystem lacks FOP_DONTCACHE) and which changes nothing. The error
// is the kernel's errno where it has one.
func probeDontCache(f *direct.File, flag int) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	switch acc := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR); {
	case acc != os.O_RDONLY && st.Size() == 0:
		if _, err := f.WithWriteFlags(rwfDontCache).WriteAt([]byte{0}, 0); err != nil {
			return errno(err)
		}
		return errno(f.Truncate(0))
	case acc != os.O_WRONLY:
		return errno(preadDontCache(f.OS()))
	}
	return errNotProbed
}

// preadDontCache reads the file's first byte with preadv2(RWF_DONTCACHE),
// which direct's reads have no flags for.
func preadDontCache(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var perr error
	err = rc.Read(func(fd uintptr) bool {
		for i := 0; ; i++ {
			_, perr = unix.Preadv2(int(fd), [][]byte{make([]byte, 1)}, 0, rwfDontCache)
			if (perr != unix.EINTR && perr != unix.EAGAIN) || i == maxRetries {
				return true
			}
		}
	})
	if err != nil {
		return err
	}
	return perr
}

// errno returns the system call's errno inside err, whose text is what
// Mode reports ("operation not supported"), or err itself.
func errno(err error) error {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return err
}
