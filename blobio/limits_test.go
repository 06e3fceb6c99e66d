package blobio_test

import (
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/fileio"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestBufferLimits: a BufferSize over fileio.MaxBufferSize is refused by
// Create, OpenAppend and Open (where it is a Scanner's read) with
// ErrInvalidOptions naming the limit, before any file is touched.
func TestBufferLimits(t *testing.T) {
	dir := testenv.Dir(t)
	path := filepath.Join(dir, "f.blob")
	for _, size := range []int{fileio.MaxBufferSize + 1, 5 << 30, 1 << 40} {
		o := &blobio.Options{BufferSize: size}
		w, err := blobio.Create(path, o)
		if err == nil {
			w.Close()
		}
		require.ErrorIs(t, err, blobio.ErrInvalidOptions, "BufferSize %d", size)
		assert.Contains(t, err.Error(), strconv.Itoa(fileio.MaxBufferSize), "the error names the limit")
		testenv.RequireEmpty(t, dir)
		_, err = blobio.OpenAppend(path, 0, o)
		require.ErrorIs(t, err, blobio.ErrInvalidOptions)
	}

	w, err := blobio.Create(path, nil)
	require.NoError(t, err)
	_, err = w.WriteBlob([]byte("blob"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	_, err = blobio.Open(path, &blobio.Options{BufferSize: 1 << 40})
	require.ErrorIs(t, err, blobio.ErrInvalidOptions, "a Scanner's read of 1 TiB")
	r, err := blobio.Open(path, &blobio.Options{BufferSize: fileio.MaxBufferSize})
	require.NoError(t, err)
	require.NoError(t, r.Close())
}

// TestRingOverMemory: a ring the system will not map (MaxBuffers of
// MaxBufferSize, 8 TiB) fails at Create with ErrInvalidOptions and ENOMEM,
// in blobio's words, and leaves no file.
func TestRingOverMemory(t *testing.T) {
	dir := testenv.Dir(t)
	w, err := blobio.Create(filepath.Join(dir, "f.blob"), &blobio.Options{BufferSize: fileio.MaxBufferSize, Buffers: fileio.MaxBuffers})
	if err == nil {
		w.Close()
		t.Skip("this system maps 8 TiB (vm.overcommit_memory=1?)")
	}
	require.ErrorIs(t, err, blobio.ErrInvalidOptions)
	require.ErrorIs(t, err, syscall.ENOMEM)
	assert.True(t, strings.HasPrefix(err.Error(), "blobio: invalid options: "), err.Error())
	testenv.RequireEmpty(t, dir)
}

// TestCreateRefusesSize: Options.Size is Open's (the logical size to read
// up to); Create refuses a non-zero one rather than ignore it, as
// fileio's does, and leaves no file, while OpenAppend, whose size
// argument rules, ignores it.
func TestCreateRefusesSize(t *testing.T) {
	dir := testenv.Dir(t)
	path := filepath.Join(dir, "f.blob")
	for _, size := range []int64{1, 4096, 1 << 30} {
		w, err := blobio.Create(path, &blobio.Options{Size: size})
		if err == nil {
			w.Close()
		}
		require.ErrorIs(t, err, blobio.ErrInvalidOptions, "Size %d", size)
		assert.Contains(t, err.Error(), "Size "+strconv.FormatInt(size, 10))
		testenv.RequireEmpty(t, dir)
	}

	w, err := blobio.Create(path, nil)
	require.NoError(t, err)
	off, err := w.WriteBlob([]byte("0123456789"))
	require.NoError(t, err)
	require.Zero(t, off)
	require.NoError(t, w.Close())
	w, err = blobio.OpenAppend(path, 11, &blobio.Options{Size: 4})
	require.NoError(t, err, "OpenAppend ignores Size")
	assert.Equal(t, int64(11), w.Size())
	require.NoError(t, w.Close())
}
