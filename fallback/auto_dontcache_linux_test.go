package fallback_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestAutoDontCacheWhereDirectRefused is the path no filesystem of the
// matrix takes (those that refuse O_DIRECT refuse RWF_DONTCACHE too): Auto
// on a filesystem that refuses O_DIRECT must use uncached buffered writes
// where they work, say so and why in Mode, and really pass the flag; where
// they do not, the plain page cache with both reasons. Direct still never
// degrades.
func TestAutoDontCacheWhereDirectRefused(t *testing.T) {
	dir := testenv.Dir(t)
	kerr := dontCacheErr(t, dir) // the kernel's answer, past fallback
	t.Cleanup(fallback.RefuseDirect())
	fsName, err := direct.Filesystem(dir)
	require.NoError(t, err)
	why := fsName + " rejected O_DIRECT: invalid argument"

	path := filepath.Join(dir, "auto")
	f, err := fallback.Open(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644, fallback.Auto)
	require.NoError(t, err)
	m := f.Mode()
	t.Logf("%s: %v", fsName, m)
	assert.False(t, m.Direct)
	assert.Equal(t, direct.EnginePwrite, m.Engine)
	assert.Equal(t, direct.Alignment{Memory: 1, Offset: 1}, f.Alignment())
	if kerr != "" {
		assert.False(t, m.DontCache)
		assert.Equal(t, "std-fs: "+why+"; RWF_DONTCACHE: "+kerr, m.String())
		require.NoError(t, f.Close())
		return
	}
	assert.Equal(t, fallback.Mode{DontCache: true, Engine: direct.EnginePwrite, Reason: why}, m)
	assert.Equal(t, "std-fs+dontcache: "+why, m.String())

	// The writes carry the flag: next to nothing stays cached.
	const size = 8 << 20
	chunk := bytes.Repeat([]byte{0x5a}, 256<<10)
	for off := 0; off < size; off += len(chunk) {
		_, err := f.WriteAt(chunk, int64(off))
		require.NoError(t, err)
	}
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	r := resident(t, path)
	t.Logf("%d of %d bytes resident", r, size)
	assert.Less(t, r, int64(size/10), "Auto's uncached file left its writes in the page cache")

	_, err = fallback.Open(filepath.Join(dir, "direct"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644, fallback.Direct)
	assert.True(t, errors.Is(err, direct.ErrNotSupported), "Direct degraded: %v", err)
}
