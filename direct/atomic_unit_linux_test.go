package direct_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/internal/testenv"
)

// countStatx counts the package's statx calls, failing the first fail of
// them with failErr, until the test ends.
func countStatx(t *testing.T, fail int, failErr error) *atomic.Int64 {
	var n atomic.Int64
	t.Cleanup(direct.SetStatx(func(dirfd int, path string, flags, mask int, st *unix.Statx_t) error {
		if n.Add(1) <= int64(fail) {
			return failErr
		}
		return unix.Statx(dirfd, path, flags, mask, st)
	}))
	return &n
}

// TestAtomicWriteStatxOnce: a File asks statx for its unit of untorn
// writes once, whatever the number of WriteAtomicAt and AtomicWrite
// calls, on it and on its WithFaults and WithWriteFlags copies, and every
// call answers as the first did (writes where the file has the unit,
// errors.ErrUnsupported where it has none); once closed it fails with
// fs.ErrClosed, as before.
func TestAtomicWriteStatxOnce(t *testing.T) {
	calls := countStatx(t, 0, nil)
	f := openOrSkip(t, filepath.Join(testenv.Dir(t), "atomic"), os.O_RDWR|os.O_CREATE)
	defer f.Close()
	before := calls.Load() // Open's alignment discovery asks statx too
	lim := f.AtomicWrite()
	n := lim.Min
	if !lim.Supported() {
		n = 4096
	}
	buf, err := aligned.New(max(n, f.Alignment().Memory), f.Alignment().Memory)
	require.NoError(t, err)
	defer buf.Free()
	p := buf.Bytes()[:n]
	copies := []*direct.File{f, f.WithFaults(nil), f.WithWriteFlags(0)}
	for i := range 30 {
		g := copies[i%len(copies)]
		assert.Equal(t, lim, g.AtomicWrite())
		_, err := g.WriteAtomicAt(p, int64(i*n))
		if lim.Supported() {
			require.NoError(t, err)
		} else {
			require.ErrorIs(t, err, errors.ErrUnsupported)
		}
	}
	assert.Equal(t, int64(1), calls.Load()-before, "statx calls for 31 AtomicWrite and 30 WriteAtomicAt")

	require.NoError(t, f.Close())
	_, err = f.WriteAtomicAt(p, 0)
	require.ErrorIs(t, err, fs.ErrClosed)
}

// TestAtomicWriteStatxError: a statx that fails (EIO, as on a filesystem
// that has shut down) fails WriteAtomicAt with that error, not
// ErrUnsupported, and is not kept: the next call asks again, and once
// statx answers the answer is kept.
func TestAtomicWriteStatxError(t *testing.T) {
	f := openOrSkip(t, filepath.Join(testenv.Dir(t), "atomic"), os.O_RDWR|os.O_CREATE)
	defer f.Close()
	calls := countStatx(t, 2, syscall.EIO)
	p := make([]byte, 4096)
	for range 2 {
		_, err := f.WriteAtomicAt(p, 0)
		require.ErrorIs(t, err, syscall.EIO)
		assert.NotErrorIs(t, err, errors.ErrUnsupported)
		var pe *os.PathError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "statx", pe.Op)
	}
	require.Equal(t, int64(2), calls.Load())
	lim := f.AtomicWrite()
	for range 5 {
		assert.Equal(t, lim, f.AtomicWrite())
	}
	assert.Equal(t, int64(3), calls.Load(), "the answer is kept once statx gives one")
}

// BenchmarkAtomicWrite prices what keeping the unit saves each
// WriteAtomicAt: AtomicWrite with the unit kept, against asking statx
// every time.
func BenchmarkAtomicWrite(b *testing.B) {
	f, err := direct.Open(filepath.Join(b.TempDir(), "atomic"), os.O_RDWR|os.O_CREATE, 0o644)
	if errors.Is(err, direct.ErrNotSupported) {
		b.Skip(err)
	}
	require.NoError(b, err)
	defer f.Close()
	b.Run("kept", func(b *testing.B) {
		for b.Loop() {
			f.AtomicWrite()
		}
	})
	b.Run("statx", func(b *testing.B) {
		for b.Loop() {
			direct.ForgetAtomicWrite(f)
			f.AtomicWrite()
		}
	})
}
