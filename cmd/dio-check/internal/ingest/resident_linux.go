package ingest

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// resident returns how many of the file's size bytes sit in the page cache
// (mincore over a mapping that faults nothing in), and size.
func resident(fd uintptr, size int64) (int64, int64, error) {
	if size == 0 {
		return 0, 0, nil
	}
	m, err := unix.Mmap(int(fd), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, size, os.NewSyscallError("mmap", err)
	}
	defer unix.Munmap(m)
	page := int64(os.Getpagesize())
	vec := make([]byte, (size+page-1)/page)
	// x/sys has no Mincore wrapper on Linux.
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return 0, size, os.NewSyscallError("mincore", errno)
	}
	var pages int64
	for _, v := range vec {
		pages += int64(v & 1)
	}
	return min(pages*page, size), size, nil
}

// Settle makes the filesystem under dir write out what earlier runs left
// dirty, and the device flush its cache, so that a run does not pay for
// its predecessor's writeback.
func Settle(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return os.NewSyscallError("syncfs", unix.Syncfs(int(f.Fd())))
}

// DropCache drops the file at path from the page cache
// (posix_fadvise POSIX_FADV_DONTNEED), so that the next read of it goes
// to the device. Only clean pages are dropped: a file written and synced,
// as WriteBlobFile leaves it, goes entirely.
func DropCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return os.NewSyscallError("fadvise", unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
}
