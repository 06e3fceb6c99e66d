package fileio_test

import (
	"errors"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/fileio"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestBufferLimits: a buffer over MaxBufferSize (BufferSize, or a Pool's:
// one that no SQE length or write(2) could carry among them) is refused
// at Create, OpenAppend and Open with ErrInvalidOptions naming the limit,
// and leaves no file; MaxBufferSize itself works.
func TestBufferLimits(t *testing.T) {
	dir := testenv.Dir(t)
	big, err := aligned.NewPool(2*fileio.MaxBufferSize, 4096, 2*fileio.MaxBufferSize) // maps nothing until Get
	require.NoError(t, err)
	defer big.Close()
	for name, o := range map[string]*fileio.Options{
		"MaxBufferSize+1": {BufferSize: fileio.MaxBufferSize + 1},
		"5GiB":            {BufferSize: 5 << 30, Buffers: 2}, // wraps an SQE's 32-bit length
		"1TiB":            {BufferSize: 1 << 40},
		"Pool":            {Pool: big},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			w, err := fileio.Create(path, o)
			if err == nil {
				w.Close()
			}
			require.ErrorIs(t, err, fileio.ErrInvalidOptions)
			assert.Contains(t, err.Error(), strconv.Itoa(fileio.MaxBufferSize), "the error names the limit")
			testenv.RequireEmpty(t, dir)
			_, err = fileio.OpenAppend(path, 0, o)
			require.ErrorIs(t, err, fileio.ErrInvalidOptions)
			_, err = fileio.Open(path, o)
			require.ErrorIs(t, err, fileio.ErrInvalidOptions)
		})
	}

	w, err := fileio.Create(filepath.Join(dir, "max"), &fileio.Options{BufferSize: fileio.MaxBufferSize, Buffers: 2})
	require.NoError(t, err, "MaxBufferSize itself is a size Create takes")
	_, err = w.Write([]byte("hello"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
}

// TestRingOverMemory: Buffers × BufferSize more than the system will map
// (MaxBuffers of MaxBufferSize: 8 TiB) fails at Create with an error
// matching ErrInvalidOptions and ENOMEM, not at the first write, and
// leaves no file.
func TestRingOverMemory(t *testing.T) {
	dir := testenv.Dir(t)
	w, err := fileio.Create(filepath.Join(dir, "f"), &fileio.Options{BufferSize: fileio.MaxBufferSize, Buffers: fileio.MaxBuffers})
	if err == nil {
		w.Close()
		t.Skip("this system maps 8 TiB (vm.overcommit_memory=1?)")
	}
	require.ErrorIs(t, err, fileio.ErrInvalidOptions)
	assert.True(t, errors.Is(err, syscall.ENOMEM), "%v", err)
	assert.Contains(t, err.Error(), "32768 buffers of 268435456 bytes")
	testenv.RequireEmpty(t, dir)
}

// TestCreateRefusesSize: Options.Size is Open's (the logical size to read
// up to); Create refuses a non-zero one rather than ignore it, and leaves
// no file, while OpenAppend, whose size argument rules, ignores it.
func TestCreateRefusesSize(t *testing.T) {
	dir := testenv.Dir(t)
	path := filepath.Join(dir, "f")
	for _, size := range []int64{1, 4096, 1 << 30} {
		w, err := fileio.Create(path, &fileio.Options{Size: size})
		if err == nil {
			w.Close()
		}
		require.ErrorIs(t, err, fileio.ErrInvalidOptions, "Size %d", size)
		assert.Contains(t, err.Error(), "Size "+strconv.FormatInt(size, 10))
		testenv.RequireEmpty(t, dir)
	}

	w, err := fileio.Create(path, nil)
	require.NoError(t, err)
	_, err = w.Write([]byte("0123456789"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	w, err = fileio.OpenAppend(path, 10, &fileio.Options{Size: 4})
	require.NoError(t, err, "OpenAppend ignores Size")
	assert.Equal(t, int64(10), w.Size())
	require.NoError(t, w.Close())
}
