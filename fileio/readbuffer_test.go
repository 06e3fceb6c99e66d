package fileio_test

import (
	"bytes"
	"io"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/faults"
	"github.com/dio-storage/dio/fileio"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestReadAtBuffer: ReadAtBuffer returns what ReadAt returns, bytes,
// count and error, at aligned and unaligned offsets and lengths, across
// the end of the file and Options.Size; aligned ones take no buffer of
// the pool (they read straight into the caller's), others do; a bad
// sector gives the bytes before it and an error naming it; a closed
// Reader refuses.
func TestReadAtBuffer(t *testing.T) {
	dir := testenv.Dir(t)
	path := filepath.Join(dir, "f")
	const size = 1<<20 + 777
	want := content(41, size)
	w, err := fileio.Create(path, nil)
	require.NoError(t, err)
	_, err = w.Write(want)
	require.NoError(t, err)
	require.NoError(t, w.Close())

	pool, err := aligned.NewPool(64<<10, 4096, 1<<20)
	require.NoError(t, err)
	r, err := fileio.Open(path, &fileio.Options{Pool: pool})
	require.NoError(t, err)
	b, err := aligned.New(300<<10, 4096)
	require.NoError(t, err)
	defer b.Free()

	// ReadAt's answer is an io.ReaderAt's over the bytes written.
	written := bytes.NewReader(want)
	// Aligned: read straight into b, through none of the pool's buffers.
	for _, c := range []struct {
		n   int
		off int64
	}{{256 << 10, 0}, {64 << 10, 4096}, {128 << 10, 1<<20 - 64<<10}, {64 << 10, 1 << 20}, {4096, 1<<20 + 4096}, {0, 8192}} {
		wb := make([]byte, c.n)
		wn, werr := written.ReadAt(wb, c.off)
		clear(b.Bytes())
		n, err := r.ReadAtBuffer(b, c.n, c.off)
		require.Equal(t, wn, n, "ReadAtBuffer(%d, %d)", c.n, c.off)
		require.Equal(t, werr, err, "ReadAtBuffer(%d, %d)", c.n, c.off)
		require.Equal(t, string(wb[:wn]), string(b.Bytes()[:n]), "ReadAtBuffer(%d, %d)", c.n, c.off)
	}
	if r.Mode().Direct {
		assert.Zero(t, pool.Stats().HighWater, "an aligned ReadAtBuffer took a pooled buffer")
	}
	same := func(n int, off int64) {
		t.Helper()
		p := make([]byte, n)
		wn, werr := r.ReadAt(p, off)
		clear(b.Bytes())
		gn, gerr := r.ReadAtBuffer(b, n, off)
		require.Equal(t, wn, gn, "ReadAtBuffer(%d, %d)", n, off)
		require.Equal(t, werr, gerr, "ReadAtBuffer(%d, %d)", n, off)
		require.Equal(t, p[:wn], b.Bytes()[:gn], "ReadAtBuffer(%d, %d)", n, off)
	}
	// Unaligned: as ReadAt, through the pool.
	for _, c := range []struct {
		n   int
		off int64
	}{{5000, 4096}, {8192, 100}, {64<<10 + 3, 1<<20 - 5}, {1, size - 1}} {
		same(c.n, c.off)
	}
	n, err := r.ReadAtBuffer(b, 4096, -4096)
	assert.Zero(t, n)
	assert.ErrorIs(t, err, fileio.ErrOffset)
	assert.Panics(t, func() { _, _ = r.ReadAtBuffer(b, b.Size()+1, 0) })
	require.NoError(t, r.Close())
	_, err = r.ReadAtBuffer(b, 4096, 0)
	assert.ErrorIs(t, err, fs.ErrClosed)

	// Options.Size cuts an aligned read short, as it does ReadAt.
	rs, err := fileio.Open(path, &fileio.Options{Size: 500_000})
	require.NoError(t, err)
	n, err = rs.ReadAtBuffer(b, 256<<10, 256<<10)
	assert.Equal(t, 500_000-256<<10, n)
	assert.ErrorIs(t, err, io.EOF)
	assert.Equal(t, want[256<<10:500_000], b.Bytes()[:n])
	require.NoError(t, rs.Close())

	// A bad sector: the bytes before it, and an error naming it.
	rb, err := fileio.Open(path, &fileio.Options{Faults: faults.NewPlan(faults.BadSectors(53248, 4096))})
	require.NoError(t, err)
	defer rb.Close()
	n, err = rb.ReadAtBuffer(b, 64<<10, 4096)
	require.ErrorIs(t, err, syscall.EIO)
	var se *direct.SectorError
	require.ErrorAs(t, err, &se)
	require.Equal(t, 53248-4096, n, "the bytes before the bad sector")
	require.Equal(t, want[4096:53248], b.Bytes()[:n])
	n, err = rb.ReadAtBuffer(b, 64<<10, 64<<10)
	require.NoError(t, err, "a read error is not sticky")
	require.Equal(t, want[64<<10:128<<10], b.Bytes()[:n])
}
