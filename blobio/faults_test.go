package blobio_test

import (
	"bytes"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/faults"
	"github.com/dio-storage/dio/internal/filetest"
)

// faultWriter is a blobio.Writer under a fault plan. A blob is
// acknowledged once a Sync after it succeeds: only those must survive a
// lasting fault.
type faultWriter struct {
	w             *blobio.Writer
	path          string
	size          func(i int) int // the i-th blob's length
	pending       [][]byte
	pendingOffs   []int64
	synced        [][]byte
	syncedOffs    []int64
	everyBlob     [][]byte // for a run without a lasting fault, which keeps them all
	everyBlobOffs []int64
}

func (fw *faultWriter) Append(i int) error {
	v := content(i, fw.size(i))
	off, err := fw.w.WriteBlob(v)
	if err != nil {
		return err
	}
	fw.pending, fw.pendingOffs = append(fw.pending, v), append(fw.pendingOffs, off)
	fw.everyBlob, fw.everyBlobOffs = append(fw.everyBlob, v), append(fw.everyBlobOffs, off)
	return nil
}

func (fw *faultWriter) Sync() error {
	if err := fw.w.Sync(); err != nil {
		return err
	}
	fw.synced, fw.syncedOffs = append(fw.synced, fw.pending...), append(fw.syncedOffs, fw.pendingOffs...)
	fw.pending, fw.pendingOffs = nil, nil
	return nil
}

func (fw *faultWriter) Finish(t *testing.T, errno syscall.Errno) {
	if errno == 0 {
		require.NoError(t, fw.w.Close())
		checkBlobs(t, fw.path, fw.w.Synced(), fw.everyBlob, fw.everyBlobOffs)
		return
	}
	assert.ErrorIs(t, fw.w.Close(), errno, "Close reports it")
	r, err := blobio.Open(fw.path, nil)
	require.NoError(t, err)
	defer r.Close()
	for i, off := range fw.syncedOffs {
		got, err := r.ReadBlob(off, nil)
		require.NoError(t, err, "synced blob %d at %d", i, off)
		require.True(t, bytes.Equal(fw.synced[i], got), "synced blob %d at %d lost", i, off)
	}
	t.Logf("%d blobs synced before the fault, all read back", len(fw.synced))
}

// TestWriteFailure fails the n-th write or fdatasync with EIO or ENOSPC:
// the error reaches the caller and stays while its cause does, every blob
// covered by an earlier successful Sync reads back, and the buffers go
// back to the pool. When the cause passes (filetest.Recovering), the next
// Sync succeeds and every blob WriteBlob acknowledged reads back.
func TestWriteFailure(t *testing.T) {
	filetest.FaultTest{
		Open: func(t *testing.T, dir string, p fallback.Policy, plan *faults.Plan) (filetest.Writer, *aligned.Pool) {
			pool, err := aligned.NewPool(8<<10, 4096, 4*(8<<10))
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			path := filepath.Join(dir, "f.blob")
			w, err := blobio.Create(path, &blobio.Options{IO: p, Pool: pool, Buffers: 3, Faults: plan})
			require.NoError(t, err)
			return &faultWriter{w: w, path: path, size: func(i int) int { return 50 + i%300 }}, pool
		},
		Appends:   5000,
		SyncEvery: 40,
	}.Run(t, append(filetest.Failures(direct.OpWrite, direct.OpSync), filetest.Recovering(3, direct.OpWrite, direct.OpSync)...))
}

// TestTransientFaults makes writes and fdatasyncs hit EINTR, EAGAIN, short
// transfers and late completions: the engines retry and resume, and the
// caller sees nothing but correct data.
func TestTransientFaults(t *testing.T) {
	filetest.FaultTest{
		Open: func(t *testing.T, dir string, p fallback.Policy, plan *faults.Plan) (filetest.Writer, *aligned.Pool) {
			path := filepath.Join(dir, "t.blob")
			w, err := blobio.Create(path, &blobio.Options{IO: p, BufferSize: 16 << 10, Buffers: 3, Faults: plan})
			require.NoError(t, err)
			return &faultWriter{w: w, path: path, size: func(i int) int { return i % 700 }}, nil
		},
		Appends:   3000,
		SyncEvery: 500,
	}.Run(t, []filetest.Fault{{
		Name:  "transient",
		Rules: append(filetest.TransientWrites(20, 5), faults.Transient(direct.OpSync, 3, syscall.EINTR)),
		Kinds: []string{"EINTR", "EAGAIN", "short", "late"},
	}})
}
