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

// dontCacheByFS is what each matrix leg's filesystem says to RWF_DONTCACHE
// on this kernel (6.18): "" for accepted, else the errno's text. Measured
// with a 1-byte pwritev2 on each; ramfs refuses it as it refuses O_DIRECT.
var dontCacheByFS = map[string]string{
	"ext4":  "",
	"xfs":   "",
	"btrfs": "operation not supported",
	"tmpfs": "operation not supported",
	"ramfs": "operation not supported",
}

// dontCacheErr asks the kernel directly, past fallback, whether files in
// dir take RWF_DONTCACHE: "" if so, else the errno's text.
func dontCacheErr(t *testing.T, dir string) string {
	t.Helper()
	f, err := os.CreateTemp(dir, "dc-")
	require.NoError(t, err)
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := unix.Pwritev2(int(f.Fd()), [][]byte{{1}}, 0, unix.RWF_DONTCACHE); err != nil {
		return err.Error()
	}
	return ""
}

// TestDontCacheProbe checks the probe's verdict on the filesystem under
// test: the measured one on each matrix leg, and the kernel's own answer
// anywhere.
func TestDontCacheProbe(t *testing.T) {
	dir := testenv.Dir(t)
	path := filepath.Join(dir, "f")
	f, err := fallback.Open(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644, fallback.DontCache)
	require.NoError(t, err)
	defer f.Close()
	m := f.Mode()
	fsName, _ := direct.Filesystem(dir)
	t.Logf("%s: %v", fsName, m)

	want := dontCacheErr(t, dir)
	if leg := testenv.FS(); leg != "" {
		w, ok := dontCacheByFS[leg]
		require.True(t, ok, "no measured RWF_DONTCACHE verdict for %s", leg)
		require.Equal(t, w, want, "the kernel's verdict on %s changed", leg)
	}
	assert.False(t, m.Direct)
	assert.Equal(t, direct.Alignment{Memory: 1, Offset: 1}, f.Alignment())
	if want == "" {
		assert.True(t, m.DontCache)
		assert.Equal(t, "std-fs+dontcache", m.String())
	} else {
		assert.False(t, m.DontCache)
		assert.Equal(t, "std-fs: RWF_DONTCACHE: "+want, m.String())
	}
	st, err := f.Stat()
	require.NoError(t, err)
	assert.Zero(t, st.Size(), "the probe's write was not cut off again")
}

// TestDontCacheProbeKeepsData opens files that hold data: the probe must
// not change them, and a write-only one is not probed at all.
func TestDontCacheProbeKeepsData(t *testing.T) {
	dir := testenv.Dir(t)
	path := filepath.Join(dir, "f")
	data := []byte("data that must survive the probe")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	for _, flag := range []int{os.O_RDONLY, os.O_RDWR, os.O_RDWR | os.O_APPEND} {
		f, err := fallback.Open(path, flag, 0, fallback.DontCache)
		require.NoError(t, err)
		assert.Equal(t, dontCacheErr(t, dir) == "", f.Mode().DontCache, "flag %#x: %v", flag, f.Mode())
		require.NoError(t, f.Close())
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, data, got, "flag %#x", flag)
	}
	f, err := fallback.Open(path, os.O_WRONLY, 0, fallback.DontCache)
	require.NoError(t, err)
	defer f.Close()
	assert.Equal(t, "std-fs: RWF_DONTCACHE: not probed on a write-only file that holds data", f.Mode().String())
}

// resident returns the bytes of path resident in the page cache (mincore).
func resident(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	st, err := f.Stat()
	require.NoError(t, err)
	if st.Size() == 0 {
		return 0
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	// x/sys has no Mincore wrapper on Linux.
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
	require.Zero(t, errno)
	var n int64
	for _, v := range vec {
		if v&1 != 0 {
			n += int64(page)
		}
	}
	return n
}

// TestDontCacheLeavesNoPageCache writes 8 MiB through WriteAt and through
// a queue, syncs, and checks that an uncached file left next to nothing in
// the page cache where a plain std-fs file left all of it: it fails if the
// flag is not passed on either path.
func TestDontCacheLeavesNoPageCache(t *testing.T) {
	dir := testenv.Dir(t)
	if dontCacheErr(t, dir) != "" {
		t.Skipf("%s refuses RWF_DONTCACHE", testenv.FS())
	}
	const size = 8 << 20
	chunk := bytes.Repeat([]byte{0xa5}, 256<<10)
	for _, p := range []fallback.Policy{fallback.StdFS, fallback.DontCache} {
		for _, how := range []string{"WriteAt", "queue"} {
			path := filepath.Join(dir, p.String()+"-"+how)
			f, err := fallback.Open(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644, p)
			require.NoError(t, err)
			if how == "WriteAt" {
				for off := 0; off < size; off += len(chunk) {
					n, err := f.WriteAt(chunk, int64(off))
					require.NoError(t, err)
					require.Equal(t, len(chunk), n)
				}
			} else {
				q, err := f.NewQueue(nil)
				require.NoError(t, err)
				done := make(chan direct.Completion, 1)
				for off := 0; off < size; off += len(chunk) {
					require.NoError(t, q.Submit(direct.Request{Op: direct.OpWrite, Buf: chunk, Off: int64(off), Done: done}))
					c := q.Await(done)
					require.NoError(t, c.Err)
				}
				require.NoError(t, q.Close())
			}
			require.NoError(t, f.Sync())
			require.NoError(t, f.Close())
			r := resident(t, path)
			t.Logf("%v via %s: %d of %d bytes resident", p, how, r, size)
			if p == fallback.DontCache {
				assert.Less(t, r, int64(size/10), "%s via %s", p, how)
			} else {
				assert.Greater(t, r, int64(size/2), "std-fs via %s: the page cache should hold it", how)
			}
		}
	}
}

// TestDontCacheClosed checks that a write after Close fails cleanly.
func TestDontCacheClosed(t *testing.T) {
	dir := testenv.Dir(t)
	f, err := fallback.Open(filepath.Join(dir, "f"), os.O_RDWR|os.O_CREATE, 0o644, fallback.DontCache)
	require.NoError(t, err)
	if !f.Mode().DontCache {
		t.Skipf("%s refuses RWF_DONTCACHE: %v", testenv.FS(), f.Mode())
	}
	require.NoError(t, f.Close())
	_, err = f.WriteAt([]byte("x"), 0)
	assert.True(t, errors.Is(err, os.ErrClosed), "%v", err)
}
