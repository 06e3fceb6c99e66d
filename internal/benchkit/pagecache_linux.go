package benchkit

import (
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Resident returns how many of the file's size bytes sit in the page cache
// (mincore over a mapping that faults nothing in), and size.
func Resident(fd uintptr, size int64) (int64, int64, error) {
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
	if err := mincore(m, vec); err != nil {
		return 0, size, err
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
// to the device. Only clean pages are dropped: a file written and synced
// goes entirely.
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
	n, _, err := Resident(f.Fd(), st.Size())
	page := int64(os.Getpagesize())
	return (n + page - 1) / page, err // a partial last page is a page
}

// ResidentPath returns how many bytes of the file at path sit in the page
// cache, and its size.
func ResidentPath(path string) (int64, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	return Resident(f.Fd(), st.Size())
}

// A Residency tells which part of a file sits in the page cache, through
// one mapping that faults nothing in (mincore), for a caller that asks
// again and again.
type Residency struct {
	m   []byte
	vec []byte
}

// NewResidency maps size bytes of f, which Close unmaps.
func NewResidency(f *os.File, size int64) (*Residency, error) {
	m, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	page := int64(os.Getpagesize())
	return &Residency{m: m, vec: make([]byte, (size+page-1)/page)}, nil
}

// Fraction returns the fraction of the file's pages resident now.
func (r *Residency) Fraction() (float64, error) {
	if err := mincore(r.m, r.vec); err != nil {
		return 0, err
	}
	n := 0
	for _, v := range r.vec {
		n += int(v & 1)
	}
	return float64(n) / float64(len(r.vec)), nil
}

// Close unmaps the file.
func (r *Residency) Close() { unix.Munmap(r.m) }

// mincore fills vec with the residency of m's pages; x/sys has no Mincore
// wrapper on Linux.
func mincore(m, vec []byte) error {
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return os.NewSyscallError("mincore", errno)
	}
	return nil
}
