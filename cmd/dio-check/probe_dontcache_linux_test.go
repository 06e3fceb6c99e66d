package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dio-storage/dio/internal/testenv"
)

// TestProbeDontCache checks the probe's dontcache verdict against the
// kernel's own answer to a 1-byte RWF_DONTCACHE write, and its text line.
func TestProbeDontCache(t *testing.T) {
	dir := testenv.Dir(t)
	f, err := os.CreateTemp(dir, "dc-")
	require.NoError(t, err)
	_, werr := unix.Pwritev2(int(f.Fd()), [][]byte{{1}}, 0, unix.RWF_DONTCACHE)
	f.Close()
	require.NoError(t, os.Remove(f.Name()))
	switch testenv.FS() {
	case "ext4", "xfs":
		require.NoError(t, werr, "measured: %s takes RWF_DONTCACHE", testenv.FS())
	case "btrfs", "tmpfs", "ramfs":
		require.ErrorIs(t, werr, unix.EOPNOTSUPP, "measured: %s refuses RWF_DONTCACHE", testenv.FS())
	}

	out, stderr, code := dioCheck(t, "-json", dir)
	require.Equal(t, 0, code, stderr)
	var p map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &p), out)
	assert.Equal(t, werr == nil, p["dontcache"], out)
	if werr != nil {
		assert.Equal(t, werr.Error(), p["dontcache_error"])
	} else {
		assert.NotContains(t, p, "dontcache_error")
	}

	out, stderr, code = dioCheck(t, dir)
	require.Equal(t, 0, code, stderr)
	want := "  RWF_DONTCACHE: yes"
	if werr != nil {
		want = "  RWF_DONTCACHE: no: " + werr.Error()
	}
	assert.True(t, strings.Contains(out, want), "want %q in\n%s", want, out)
	testenv.RequireEmpty(t, dir)
}
