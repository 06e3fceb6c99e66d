package reader

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
)

// TestSharedPools: Readers given the same Small and Large pools draw
// their buffers from them (one budget for both) and leave them to the
// others at Close; pools that do not fit the file are refused with
// Options.Invalid.
func TestSharedPools(t *testing.T) {
	path, want := patterned(t, 1<<20)
	small := NewPool(4, aligned.Up(SmallRead, 4096), 4096)
	large := NewPool(2, aligned.Up(LargeRead, 4096)+4096, 4096)
	defer small.Close()
	defer large.Close()
	o := testOptions()
	o.Small, o.Large = small, large
	a, err := Open(path, o)
	require.NoError(t, err)
	b, err := Open(path, o)
	require.NoError(t, err)
	p := make([]byte, 100<<10)
	for _, r := range []*Reader{a, b} {
		n, err := r.ReadAt(p[:4000], 5000)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want[5000:5000+n], p[:n]))
		_, err = r.ReadAt(p, 9000)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want[9000:9000+len(p)], p))
	}
	assert.Equal(t, 1, small.Made(), "both Readers' small reads took the one buffer")
	assert.Equal(t, 1, large.Made())
	require.NoError(t, a.Close())
	assert.Equal(t, 1, small.Idle(), "a Reader's Close leaves shared pools to the others")
	_, err = b.ReadAt(p[:10], 0)
	require.NoError(t, err)
	require.NoError(t, b.Close())

	misfit := NewPool(1, 1000, 8)
	o.Small = misfit
	_, err = Open(path, o)
	require.ErrorIs(t, err, errInvalid)
	o.Small, o.Large = nil, large
	_, err = Open(path, o)
	require.ErrorIs(t, err, errInvalid, "one pool shared, not the other")
}
