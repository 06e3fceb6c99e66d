package fallback_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/testenv"
)

// kernelDontCache asks the kernel, past fallback, whether files in dir take
// RWF_DONTCACHE: nil if so, else its errno.
func kernelDontCache(t *testing.T, dir string) error {
	t.Helper()
	f, err := os.CreateTemp(dir, "dc-")
	require.NoError(t, err)
	defer os.Remove(f.Name())
	defer f.Close()
	_, err = unix.Pwritev2(int(f.Fd()), [][]byte{{1}}, 0, unix.RWF_DONTCACHE)
	return err
}

// residentBytes returns how much of path the page cache holds (mincore).
func residentBytes(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	st, err := f.Stat()
	require.NoError(t, err)
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
	require.Zero(t, errno)
	var n int64
	for _, v := range vec {
		n += int64(v&1) * int64(page)
	}
	return n
}

// TestAutoDontCacheWhereDirectRefused is the path no filesystem of the
// matrix takes (those that refuse O_DIRECT refuse RWF_DONTCACHE too): Auto
// on a filesystem that refuses O_DIRECT must use uncached buffered writes
// where they work, say so and why in Mode, and really pass the flag; where
// they do not, the plain page cache with both reasons. Direct still never
// degrades.
func TestAutoDontCacheWhereDirectRefused(t *testing.T) {
	dir := testenv.Dir(t)
	kerr := kernelDontCache(t, dir)
	t.Cleanup(fallback.RefuseDirect())
	fsName, err := direct.Filesystem(dir)
	require.NoError(t, err)
	why := fsName + " rejected O_DIRECT: invalid argument"

	path := filepath.Join(dir, "auto")
	f, err := fallback.Open(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644, fallback.Auto)
	require.NoError(t, err)
	m := f.Mode()
	t.Logf("%s: %v", fsName, m)
	assert.False(t, m.Direct)
	assert.Equal(t, direct.EnginePwrite, m.Engine)
	assert.Equal(t, direct.Alignment{Memory: 1, Offset: 1}, f.Alignment())
	if kerr != nil {
		assert.False(t, m.DontCache)
		assert.Equal(t, "std-fs: "+why+"; RWF_DONTCACHE: "+kerr.Error(), m.String())
		require.NoError(t, f.Close())
		return
	}
	assert.Equal(t, fallback.Mode{DontCache: true, Engine: direct.EnginePwrite, Reason: why}, m)
	assert.Equal(t, "std-fs+dontcache: "+why, m.String())

	// The writes carry the flag: next to nothing stays cached.
	const size = 8 << 20
	chunk := bytes.Repeat([]byte{0x5a}, 256<<10)
	for off := 0; off < size; off += len(chunk) {
		_, err := f.WriteAt(chunk, int64(off))
		require.NoError(t, err)
	}
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	r := residentBytes(t, path)
	t.Logf("%d of %d bytes resident", r, size)
	assert.Less(t, r, int64(size/10), "Auto's uncached file left its writes in the page cache")

	_, err = fallback.Open(filepath.Join(dir, "direct"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644, fallback.Direct)
	assert.True(t, errors.Is(err, direct.ErrNotSupported), "Direct degraded: %v", err)
}
