package direct

import "golang.org/x/sys/unix"

// RingsCreated returns how many shared io_uring rings the process has set
// up.
func RingsCreated() int {
	rings.mu.Lock()
	defer rings.mu.Unlock()
	return rings.created
}

// SameRing reports whether two io_uring queues share a ring.
func SameRing(a, b Queue) bool { return a.(*uringQueue).u == b.(*uringQueue).u }

// BreakRing makes the next wait for completions on q's ring fail with err,
// as a broken ring's io_uring_enter would, without entering the kernel.
func BreakRing(q Queue, err error) {
	u := q.(*uringQueue).u
	u.mu.Lock()
	defer u.mu.Unlock()
	u.testFail = func() error { return err }
}

// SetStatx makes the package's statx calls go through fn, for a test to
// count or fail them, until the returned restore is called.
func SetStatx(fn func(dirfd int, path string, flags int, mask int, st *unix.Statx_t) error) (restore func()) {
	old := statx
	statx = fn
	return func() { statx = old }
}

// ForgetAtomicWrite drops f's kept unit of untorn writes, so that the
// next call asks statx again: a benchmark's way to price the statx.
func ForgetAtomicWrite(f *File) { f.unit.lim.Store(nil) }
