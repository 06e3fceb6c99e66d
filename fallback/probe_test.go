package fallback_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestProbe: Probe reports the Mode Open with Auto gives a new file in
// the directory, and answers that agree with it: O_DIRECT refused exactly
// where Open fell back to the page cache, the engine io_uring exactly
// where the engine's policy allows it, uncached writes where Auto's
// fallback takes them; the chosen path passes a real write and read
// back; and nothing is left in the directory.
func TestProbe(t *testing.T) {
	dir := testenv.Dir(t)
	r, err := fallback.Probe(dir)
	require.NoError(t, err)
	testenv.RequireEmpty(t, dir)

	f, err := fallback.Open(filepath.Join(dir, "f"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600, fallback.Auto)
	require.NoError(t, err)
	want := f.Mode()
	f.Close()
	require.NoError(t, os.Remove(filepath.Join(dir, "f")))
	assert.Equal(t, want.Name(), r.Mode.Name())
	assert.Equal(t, want.Direct, r.Direct == nil, "O_DIRECT: %v", r.Direct)
	if r.Direct != nil {
		assert.ErrorIs(t, r.Direct, direct.ErrNotSupported)
		assert.Equal(t, r.DontCache == nil, r.Mode.DontCache, "uncached writes: %v", r.DontCache)
	} else {
		assert.Equal(t, r.URing == nil, r.Mode.Engine == direct.EngineURing, "io_uring: %v", r.URing)
	}
	assert.NoError(t, r.Check)
	if testenv.RejectsDirect() {
		assert.Error(t, r.Direct)
	}

	_, err = fallback.Probe(filepath.Join(dir, "missing"))
	assert.True(t, errors.Is(err, fs.ErrNotExist), "%v", err)
}
