package appender

import (
	"os"

	"golang.org/x/sys/unix"
)

var pageSize = int64(os.Getpagesize())

// dropCache asks the kernel to drop [off, off+n) of the file from the
// page cache.
func dropCache(fd uintptr, off, n int64) {
	unix.Fadvise(int(fd), off, n, unix.FADV_DONTNEED)
}
