package blobio

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/internal/appender"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestCreateSyncsDirectory: Create fsyncs the new file's directory once,
// and a directory fsync that fails fails Create and leaves no file.
func TestCreateSyncsDirectory(t *testing.T) {
	dir := testenv.Dir(t)
	var synced []string
	count := func(d string) error { synced = append(synced, d); return appender.SyncDir(d) }
	w, err := create(filepath.Join(dir, "f.blob"), nil, count)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	assert.Equal(t, []string{dir}, synced)

	fail := func(string) error { return syscall.EIO }
	_, err = create(filepath.Join(dir, "g.blob"), nil, fail)
	require.ErrorIs(t, err, syscall.EIO)
	_, err = os.Stat(filepath.Join(dir, "g.blob"))
	assert.True(t, errors.Is(err, os.ErrNotExist), "a failed Create left its file: %v", err)

	// The real one works on the filesystem under test.
	require.NoError(t, appender.SyncDir(dir))
}
