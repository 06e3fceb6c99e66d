package ephemeral_test

import (
	"strconv"
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
