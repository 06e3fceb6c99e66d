package fallback

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// rwfDontCache is RWF_DONTCACHE (include/uapi/linux/fs.h, Linux 6.14): a
// buffered write whose pages are written back and dropped from the page
// cache as soon as the write completes. Older kernels and filesystems
// without FOP_DONTCACHE (btrfs, tmpfs, ramfs here) refuse it with
// EOPNOTSUPP.
const rwfDontCache = unix.RWF_DONTCACHE

// maxRetries bounds the retries of a system call that keeps failing with
// EINTR or EAGAIN, as direct's transfers do.
const maxRetries = 100

// errNotProbed is why a write-only file that holds data gets the plain
// page cache: the probe can neither write to it harmlessly nor read.
var errNotProbed = errors.New("not probed on a write-only file that holds data")

// probeDontCache finds out whether the file takes RWF_DONTCACHE. An empty
// writable file gets a real 1-byte uncached write, cut off again; a file
// with data gets a 1-byte uncached read instead, which the kernel checks
// the same way (kiocb_set_rw_flags refuses the flag for both directions
// where the filesystem lacks FOP_DONTCACHE) and which changes nothing.
func probeDontCache(f *os.File, flag int) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	acc := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var perr error
	switch {
	case acc != os.O_RDONLY && st.Size() == 0:
		err = rc.Write(func(fd uintptr) bool {
			perr = retry(func() error {
				_, err := unix.Pwritev2(int(fd), [][]byte{{0}}, 0, rwfDontCache)
				return err
			})
			if perr == nil {
				perr = retry(func() error { return unix.Ftruncate(int(fd), 0) })
			}
			return true
		})
	case acc != os.O_WRONLY:
		err = rc.Read(func(fd uintptr) bool {
			perr = retry(func() error {
				_, err := unix.Preadv2(int(fd), [][]byte{make([]byte, 1)}, 0, rwfDontCache)
				return err
			})
			return true
		})
	default:
		return errNotProbed
	}
	if err != nil {
		return err
	}
	return perr
}

// retry calls op until it fails with something other than EINTR or
// EAGAIN, a bounded number of times.
func retry(op func() error) error {
	for i := 0; ; i++ {
		err := op()
		if (err != unix.EINTR && err != unix.EAGAIN) || i == maxRetries {
			return err
		}
	}
}

// pwriteDontCache writes p at off with pwritev2(RWF_DONTCACHE), resuming
// short writes. The descriptor is used through SyscallConn, so a Close
// racing the write cannot redirect it to a reused number.
func pwriteDontCache(f *os.File, p []byte, off int64) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	n := 0
	var werr error
	err = rc.Write(func(fd uintptr) bool {
		for n < len(p) && werr == nil {
			var m int
			werr = retry(func() (err error) {
				m, err = unix.Pwritev2(int(fd), [][]byte{p[n:]}, off+int64(n), rwfDontCache)
				return err
			})
			if werr == nil && m == 0 {
				werr = io.ErrShortWrite
			}
			n += max(m, 0) // a failed call returns -1
		}
		return true
	})
	if err != nil {
		// RawConn.Write on a file that cannot be polled fails only
		// when the file is closed or closing.
		return n, os.ErrClosed
	}
	return n, werr
}
