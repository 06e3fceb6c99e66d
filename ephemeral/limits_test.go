package ephemeral_test

import (
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/ephemeral"
	"github.com/dio-storage/dio/fileio"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestBufferLimits: a BufferSize over fileio.MaxBufferSize is refused by
// Create with ErrInvalidOptions naming the limit, and leaves nothing.
func TestBufferLimits(t *testing.T) {
	dir := testenv.Dir(t)
	for _, size := range []int{fileio.MaxBufferSize + 1, 5 << 30, 1 << 40} {
		f, err := ephemeral.Create(dir, &ephemeral.Options{BufferSize: size, Buffers: 2})
		if err == nil {
			f.Close()
		}
		require.ErrorIs(t, err, ephemeral.ErrInvalidOptions, "BufferSize %d", size)
		assert.Contains(t, err.Error(), strconv.Itoa(fileio.MaxBufferSize), "the error names the limit")
		testenv.RequireEmpty(t, dir)
	}
}

// TestRingOverMemory: a ring the system will not map (MaxBuffers of
// MaxBufferSize, 8 TiB) fails at Create with ErrInvalidOptions and ENOMEM
// and leaves nothing.
func TestRingOverMemory(t *testing.T) {
	dir := testenv.Dir(t)
	f, err := ephemeral.Create(dir, &ephemeral.Options{BufferSize: fileio.MaxBufferSize, Buffers: fileio.MaxBuffers})
	if err == nil {
		f.Close()
		t.Skip("this system maps 8 TiB (vm.overcommit_memory=1?)")
	}
	require.ErrorIs(t, err, ephemeral.ErrInvalidOptions)
	require.ErrorIs(t, err, syscall.ENOMEM)
	testenv.RequireEmpty(t, dir)
}
