package reliability

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/ephemeral"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestBadInput feeds every package the inputs a caller gets wrong: each is
// a clear error or a defined result, never a panic, and nothing is left
// behind.
func TestBadInput(t *testing.T) {
	dir := testenv.Dir(t)
	file := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))

	// aligned: zero and negative sizes.
	for _, size := range []int{0, -4096} {
		_, err := aligned.New(size, 4096)
		assert.ErrorIs(t, err, aligned.ErrBadSize)
		_, err = aligned.NewPool(size, 4096, 1<<20)
		assert.Error(t, err)
	}

	// fallback and direct: nil and empty buffers, a directory as a file.
	f, err := fallback.Open(filepath.Join(dir, "f"), os.O_RDWR|os.O_CREATE, 0o644, fallback.Auto)
	require.NoError(t, err)
	n, err := f.WriteAt(nil, 0)
	assert.NoError(t, err)
	assert.Zero(t, n)
	n, err = f.ReadAt(nil, 0)
	assert.NoError(t, err)
	assert.Zero(t, n)
	_, err = f.ReadAt(make([]byte, 1), -1)
	assert.ErrorIs(t, err, direct.ErrNegativeOffset)
	require.NoError(t, f.Close())
	require.NoError(t, os.Remove(filepath.Join(dir, "f")))
	_, err = fallback.Open(dir, os.O_RDWR, 0, fallback.Auto)
	assert.Error(t, err, "a directory opened for writing")

	// blobio: a directory where a file is expected and the reverse, an
	// empty blob, offsets past the end, nil destinations.
	_, err = blobio.Create(dir, nil)
	assert.ErrorIs(t, err, fs.ErrExist)
	_, err = blobio.Create(filepath.Join(file, "under-a-file"), nil)
	assert.Error(t, err)
	_, err = blobio.Open(dir, nil)
	assert.Error(t, err)
	w, err := blobio.Create(filepath.Join(dir, "b"), nil)
	require.NoError(t, err)
	off, err := w.WriteBlob(nil)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	r, err := blobio.Open(filepath.Join(dir, "b"), nil)
	require.NoError(t, err)
	got, err := r.ReadBlob(off, nil)
	assert.NoError(t, err)
	assert.Empty(t, got)
	_, err = r.ReadBlob(r.Size()+1, nil)
	assert.ErrorIs(t, err, blobio.ErrOffset)
	require.NoError(t, r.Close())
	require.NoError(t, os.Remove(filepath.Join(dir, "b")))

	// ephemeral: a file where a directory is expected, nil and empty reads.
	_, err = ephemeral.Create(file, nil)
	assert.Error(t, err)
	e, err := ephemeral.Create(dir, nil)
	require.NoError(t, err)
	n, err = e.ReadAt(nil, 0)
	assert.Zero(t, n)
	assert.NoError(t, err, "an empty read succeeds, as os.File's does")
	n, err = e.ReadAt(make([]byte, 1), 0)
	assert.Zero(t, n)
	assert.ErrorIs(t, err, io.EOF, "a read at the end of an empty file")
	_, err = e.Write(nil)
	assert.NoError(t, err)
	require.NoError(t, e.Close())

	require.NoError(t, os.Remove(file))
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, ents, "bad input left files behind")
}

// TestReadOnlyDirectory: creating in a directory that refuses writes is a
// clear error and leaves nothing.
func TestReadOnlyDirectory(t *testing.T) {
	dir := testenv.Dir(t)
	ro, want := testenv.ReadOnlyDir(t, dir)
	_, err := blobio.Create(filepath.Join(ro, "b"), nil)
	assert.ErrorIs(t, err, want)
	_, err = ephemeral.Create(ro, nil)
	assert.ErrorIs(t, err, want)
	ents, _ := os.ReadDir(ro)
	assert.Empty(t, ents)
}
