package fallback_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestAutoWithoutURing runs in a child process whose seccomp filter refuses
// io_uring_setup, as a container's default profile does: Auto must keep
// O_DIRECT, use the pwrite engine, and say why.
func TestAutoWithoutURing(t *testing.T) {
	if !testenv.InChild(t, "deny-uring") {
		return
	}
	require.NoError(t, testenv.DenyURing())
	f, err := fallback.Open(filepath.Join(testenv.Dir(t), "f"), os.O_RDWR|os.O_CREATE, 0o644, fallback.Auto)
	require.NoError(t, err)
	defer f.Close()
	if testenv.RejectsDirect() {
		assert.Equal(t, "std-fs", f.Mode().Name())
		return
	}
	assert.Equal(t, "direct+pwrite: io_uring_setup: operation not permitted", f.Mode().String())
	q, err := f.NewQueue(nil)
	require.NoError(t, err)
	defer q.Close()
	assert.Equal(t, direct.EnginePwrite, q.Engine())
}
