package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/internal/testenv"
)

func TestUnwritableDirectory(t *testing.T) {
	dir := testenv.Dir(t)
	ro := filepath.Join(dir, "ro")
	require.NoError(t, os.Mkdir(ro, 0o755))
	if os.Geteuid() == 0 {
		// Root writes anywhere permissions say no: use a read-only mount.
		if err := syscall.Mount("tmpfs", ro, "tmpfs", syscall.MS_RDONLY, ""); err != nil {
			t.Skipf("cannot mount a read-only tmpfs: %v", err)
		}
		defer syscall.Unmount(ro, 0)
	} else {
		require.NoError(t, os.Chmod(ro, 0o555))
	}
	_, stderr, code := dioCheck(t, ro)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "cannot create a file")
}
