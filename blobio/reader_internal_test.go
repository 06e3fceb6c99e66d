package blobio

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/internal/testenv"
)

// TestScanReadSize: a Scanner reads DefaultScanRead at a time unless the
// caller sets BufferSize, which then rules.
func TestScanReadSize(t *testing.T) {
	path := filepath.Join(testenv.Dir(t), "f")
	require.NoError(t, os.WriteFile(path, []byte{1, 'x'}, 0o600))
	for _, c := range []struct {
		o    *Options
		want int
	}{
		{nil, DefaultScanRead},
		{&Options{}, DefaultScanRead},
		{&Options{BufferSize: 8192}, 8192},
		{&Options{BufferSize: 1 << 20}, 1 << 20},
	} {
		r, err := Open(path, c.o)
		require.NoError(t, err)
		assert.Equal(t, c.want, r.scanSize, "%+v", c.o)
		require.NoError(t, r.Close())
	}
}
