package ingest

import (
	"os"
	"time"
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
//
// fadvise passes over a page it cannot take at that moment, one still
// being read in or held by reclaim or compaction, and that page stays
// cached: a direct run after a std-fs one then finds it resident (CI saw
// 34 pages so). So while pages remain, DropCache asks again after a pause
// that doubles, for up to dropPatience. Where its first pass drops
// nothing, as on a memory filesystem, nothing can go and it stops there.
func DropCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	before, err := cachedPages(f)
	if err != nil {
		return err
	}
	var waited time.Duration
	for pause := time.Millisecond; ; pause *= 2 {
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			return os.NewSyscallError("fadvise", err)
		}
		left, err := cachedPages(f)
		if err != nil || left == 0 || (waited == 0 && left == before) || waited >= dropPatience {
			return err
		}
		time.Sleep(pause)
		waited += pause
	}
}

// dropPatience bounds how long DropCache waits for pages it could not
// drop at once: a read under way ends well within it.
const dropPatience = 100 * time.Millisecond

// cachedPages returns how many of f's pages the page cache holds, pages
// still being read in included (cachestat(2)); where cachestat is missing
// (before Linux 6.5) or refused (a seccomp filter), those mincore finds.
func cachedPages(f *os.File) (int64, error) {
	var cs unix.Cachestat_t
	if unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{}, &cs, 0) == nil {
		return int64(cs.Cache), nil
	}
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	n, _, err := resident(f.Fd(), st.Size())
	page := int64(os.Getpagesize())
	return (n + page - 1) / page, err // a partial last page is a page
}
