package benchkit

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dio-storage/dio/internal/testenv"
)

// cachedFile writes a file of n pages and syncs it, drops it from the page
// cache, then reads it back a page at a time with read-ahead off, so that
// all of it is cached and clean, each page in a folio of its own.
func cachedFile(t *testing.T, n int) (string, *os.File) {
	t.Helper()
	path := filepath.Join(testenv.Dir(t), "cached")
	page := os.Getpagesize()
	require.NoError(t, os.WriteFile(path, make([]byte, n*page), 0o644))
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	require.NoError(t, unix.Fdatasync(int(f.Fd())))
	require.NoError(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
	require.NoError(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM))
	buf := make([]byte, page)
	for i := range n {
		_, err := f.ReadAt(buf, int64(i*page))
		require.NoError(t, err)
	}
	pages, err := cachedPages(f)
	require.NoError(t, err)
	require.Equal(t, int64(n), pages, "the file is cached after reading it")
	return path, f
}

// mapPage maps f's first page and touches it: the page cache cannot drop a
// page a process maps, which stands in for one fadvise finds busy.
func mapPage(t *testing.T, f *os.File) []byte {
	t.Helper()
	m, err := unix.Mmap(int(f.Fd()), 0, os.Getpagesize(), unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	require.Zero(t, m[0], "the file is zeros")
	return m
}

// TestDropCacheWaitsForBusyPages holds one page where fadvise cannot drop
// it and lets it go 10 ms later: DropCache must try again and drop it.
func TestDropCacheWaitsForBusyPages(t *testing.T) {
	if memoryFS() {
		t.Skip("a memory filesystem is its page cache")
	}
	path, f := cachedFile(t, 16)
	m := mapPage(t, f)
	released := make(chan error, 1)
	go func() {
		time.Sleep(10 * time.Millisecond)
		released <- unix.Munmap(m)
	}()
	require.NoError(t, DropCache(path))
	require.NoError(t, <-released)
	pages, err := cachedPages(f)
	require.NoError(t, err)
	assert.Zero(t, pages, "the page let go during DropCache is dropped too")
}

// TestDropCacheGivesUp holds a page for good: DropCache drops the rest and
// returns, with no error, once its patience is spent.
func TestDropCacheGivesUp(t *testing.T) {
	if memoryFS() {
		t.Skip("a memory filesystem is its page cache")
	}
	path, f := cachedFile(t, 16)
	m := mapPage(t, f)
	defer unix.Munmap(m)
	start := time.Now()
	require.NoError(t, DropCache(path))
	assert.GreaterOrEqual(t, time.Since(start), dropPatience, "it waited for the page")
	pages, err := cachedPages(f)
	require.NoError(t, err)
	assert.Equal(t, int64(1), pages, "only the mapped page stays")
}

// TestDropCacheMemoryFS: where nothing can be dropped, one pass shows it
// and DropCache does not wait.
func TestDropCacheMemoryFS(t *testing.T) {
	if !memoryFS() {
		t.Skip("needs a memory filesystem")
	}
	path, f := cachedFile(t, 16)
	start := time.Now()
	require.NoError(t, DropCache(path))
	assert.Less(t, time.Since(start), dropPatience, "no wait for pages that cannot go")
	pages, err := cachedPages(f)
	require.NoError(t, err)
	assert.Equal(t, int64(16), pages)
}

// memoryFS reports whether the test filesystem keeps files in memory,
// where nothing can be dropped from the page cache.
func memoryFS() bool { return testenv.FS() == "tmpfs" || testenv.FS() == "ramfs" }

// TestResidency: Resident, ResidentPath and a Residency agree on a file
// read whole into the page cache (all of it), and, but on a memory
// filesystem, once DropCache has dropped it (none).
func TestResidency(t *testing.T) {
	path, f := cachedFile(t, 16)
	size := int64(16 * os.Getpagesize())
	res, err := NewResidency(f, size)
	require.NoError(t, err)
	defer res.Close()
	check := func(want int64) {
		t.Helper()
		n, total, err := Resident(f.Fd(), size)
		require.NoError(t, err)
		assert.Equal(t, want, n)
		assert.Equal(t, size, total)
		n, total, err = ResidentPath(path)
		require.NoError(t, err)
		assert.Equal(t, want, n)
		assert.Equal(t, size, total)
		frac, err := res.Fraction()
		require.NoError(t, err)
		assert.InDelta(t, float64(want)/float64(size), frac, 1e-9)
	}
	check(size)
	require.NoError(t, DropCache(path))
	if !memoryFS() {
		check(0)
	}
}
