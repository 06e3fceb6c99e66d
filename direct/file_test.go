package direct_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/internal/filetest"
	"github.com/dio-storage/dio/internal/testenv"
)

// openOrSkip opens path with O_DIRECT, skipping the test on a filesystem
// that refuses it (the ramfs leg checks the refusal in TestOpenRejected).
func openOrSkip(t *testing.T, path string, flag int) *direct.File {
	t.Helper()
	f, err := direct.Open(path, flag, 0o644)
	if errors.Is(err, direct.ErrNotSupported) {
		t.Skipf("%s refuses O_DIRECT: %v", testenv.FS(), err)
	}
	require.NoError(t, err)
	return f
}

func TestConformance(t *testing.T) {
	filetest.Run(t, testenv.Dir(t), func(t *testing.T, path string, flag int) filetest.File {
		return openOrSkip(t, path, flag)
	})
}

func TestPageCacheConformance(t *testing.T) {
	filetest.Run(t, testenv.Dir(t), func(t *testing.T, path string, flag int) filetest.File {
		f, err := os.OpenFile(path, flag, 0o644)
		require.NoError(t, err)
		return direct.Buffered(f)
	})
}

func TestAlignmentDiscovered(t *testing.T) {
	f := openOrSkip(t, filepath.Join(testenv.Dir(t), "f"), os.O_RDWR|os.O_CREATE)
	defer f.Close()
	a := f.Alignment()
	t.Logf("%s: alignment %v from %s", testenv.FS(), a, f.AlignmentSource())
	for _, n := range []int{a.Memory, a.Offset} {
		assert.True(t, n > 0 && n&(n-1) == 0, "alignment %v is not a power of two", a)
	}
	assert.LessOrEqual(t, a.Offset, 64<<10)

	switch testenv.FS() {
	case "ext4", "xfs":
		// These report STATX_DIOALIGN, and the loop device's sector is the
		// offset rule.
		assert.Equal(t, direct.SourceStatx, f.AlignmentSource())
		if s := testenv.Sector(); s > 0 {
			assert.Equal(t, s, a.Offset, "offset alignment on a %d-byte-sector device", s)
		}
	case "tmpfs", "btrfs":
		// Nothing reported and no block device under them: the default.
		if f.AlignmentSource() != direct.SourceStatx {
			assert.Equal(t, direct.Alignment{Memory: 4096, Offset: 4096}, a)
		}
	}
}

// TestSectorRefusesSmallerWrite is the xfs leg's check: on a 4 KiB-sector
// device a 512-byte direct write is refused as ErrUnaligned before the
// kernel can answer with a bare EINVAL.
func TestSectorRefusesSmallerWrite(t *testing.T) {
	f := openOrSkip(t, filepath.Join(testenv.Dir(t), "f"), os.O_RDWR|os.O_CREATE)
	defer f.Close()
	if f.Alignment().Offset <= 512 {
		t.Skipf("offset alignment %d accepts 512-byte writes", f.Alignment().Offset)
	}
	b, err := aligned.New(f.Alignment().Offset, f.Alignment().Offset)
	require.NoError(t, err)
	defer b.Free()
	_, err = f.WriteAt(b.Bytes()[:512], 0)
	require.ErrorIs(t, err, direct.ErrUnaligned)
	assert.NotErrorIs(t, err, direct.ErrNotSupported)
	assert.Contains(t, err.Error(), "length 512")

	// Bypassing the check shows what it saves the caller from.
	_, err = f.OS().WriteAt(b.Bytes()[:512], 0)
	if testenv.FS() == "xfs" {
		assert.Error(t, err, "the kernel accepted a 512-byte write on a 4 KiB-sector device")
	}
}

func TestOpenRejected(t *testing.T) {
	if !testenv.RejectsDirect() {
		t.Skip("the filesystem under test accepts O_DIRECT; the ramfs leg runs this")
	}
	dir := testenv.Dir(t)
	path := filepath.Join(dir, "f")
	f, err := direct.Open(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	assert.Nil(t, f)
	require.ErrorIs(t, err, direct.ErrNotSupported)
	var pe *fs.PathError
	require.True(t, errors.As(err, &pe))
	assert.Equal(t, path, pe.Path)
	_, err = os.Lstat(path)
	assert.ErrorIs(t, err, fs.ErrNotExist, "the refused open left its file behind")

	// Without O_EXCL the same: the file Open created goes.
	_, err = direct.Open(path, os.O_RDWR|os.O_CREATE, 0o644)
	require.ErrorIs(t, err, direct.ErrNotSupported)
	_, err = os.Lstat(path)
	assert.ErrorIs(t, err, fs.ErrNotExist, "the refused open left its file behind")

	// A file that was there stays: only a file Open created is removed.
	require.NoError(t, os.WriteFile(path, []byte("someone's"), 0o644))
	_, err = direct.Open(path, os.O_RDWR|os.O_CREATE, 0o644)
	require.ErrorIs(t, err, direct.ErrNotSupported)
	got, err := os.ReadFile(path)
	require.NoError(t, err, "the refused open removed a file it did not create")
	assert.Equal(t, "someone's", string(got))
}

func TestOpenErrors(t *testing.T) {
	dir := testenv.Dir(t)
	_, err := direct.Open(filepath.Join(dir, "missing"), os.O_RDONLY, 0)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.NotErrorIs(t, err, direct.ErrNotSupported)

	_, err = direct.Open(filepath.Join(dir, "missing", "f"), os.O_RDWR|os.O_CREATE, 0o644)
	assert.ErrorIs(t, err, fs.ErrNotExist)

	// A NUL in the name is no filesystem's refusal of O_DIRECT.
	_, err = direct.Open(filepath.Join(dir, "a\x00b"), os.O_RDWR|os.O_CREATE, 0o644)
	assert.Error(t, err)
	assert.NotErrorIs(t, err, direct.ErrNotSupported)

	// A directory cannot be opened for writing.
	_, err = direct.Open(dir, os.O_RDWR, 0)
	assert.Error(t, err)
}

func TestAllocate(t *testing.T) {
	f := openOrSkip(t, filepath.Join(testenv.Dir(t), "f"), os.O_RDWR|os.O_CREATE)
	defer f.Close()
	err := f.Allocate(0, 1<<20)
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("fallocate unsupported: %v", err)
	}
	require.NoError(t, err)
	st, err := f.Stat()
	require.NoError(t, err)
	assert.Equal(t, int64(1<<20), st.Size(), "Allocate grows the file")
}
