package blobio_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/faults"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestWriteFailure fails the n-th write or fdatasync with EIO or ENOSPC:
// the error reaches the caller and stays, every blob covered by an earlier
// successful Sync reads back, and the buffers go back to the pool.
func TestWriteFailure(t *testing.T) {
	for _, p := range testenv.Policies() {
		for _, errno := range []syscall.Errno{syscall.EIO, syscall.ENOSPC} {
			for _, op := range []direct.Op{direct.OpWrite, direct.OpSync} {
				for _, nth := range []int{0, 3, 17} {
					name := fmt.Sprintf("%v/%s/%v/%d", p, errno, op, nth)
					t.Run(name, func(t *testing.T) { writeFailure(t, p, faults.Fail(op, nth, errno), errno) })
				}
			}
		}
	}
}

func writeFailure(t *testing.T, p fallback.Policy, rule faults.Rule, errno syscall.Errno) {
	goroutines := runtime.NumGoroutine()
	pool, err := aligned.NewPool(8<<10, 4096, 4*(8<<10))
	require.NoError(t, err)
	defer pool.Close()
	plan := faults.NewPlan(rule)
	path := filepath.Join(testenv.Dir(t), "f.blob")
	w, err := blobio.Create(path, &blobio.Options{IO: p, Pool: pool, Buffers: 3, Faults: plan})
	require.NoError(t, err)

	var synced, pending [][]byte
	var syncedOffs, pendingOffs []int64
	var failure error
	for i := 0; failure == nil && i < 5000; i++ {
		v := content(i, 50+i%300)
		off, err := w.WriteBlob(v)
		if err != nil {
			failure = err
			break
		}
		pending, pendingOffs = append(pending, v), append(pendingOffs, off)
		if i%40 == 39 {
			if err := w.Sync(); err != nil {
				failure = err
				break
			}
			synced, syncedOffs = append(synced, pending...), append(syncedOffs, pendingOffs...)
			pending, pendingOffs = nil, nil
		}
	}
	require.Error(t, failure, "the injected fault never surfaced")
	require.ErrorIs(t, failure, errno)
	_, err = w.WriteBlob([]byte("after"))
	assert.ErrorIs(t, err, errno, "the error is sticky for WriteBlob")
	assert.ErrorIs(t, w.Sync(), errno, "the error is sticky for Sync")
	assert.ErrorIs(t, w.Close(), errno, "Close reports it")
	assert.Zero(t, pool.Stats().InUse, "buffers leaked")
	assert.NotEmpty(t, plan.Injected())

	r, err := blobio.Open(path, nil)
	require.NoError(t, err)
	defer r.Close()
	for i, off := range syncedOffs {
		got, err := r.ReadBlob(off, nil)
		require.NoError(t, err, "synced blob %d at %d", i, off)
		require.True(t, bytes.Equal(synced[i], got), "synced blob %d at %d lost", i, off)
	}
	t.Logf("%d blobs synced before the fault, all read back; injected %v", len(synced), plan.Injected())
	r.Close()
	testenv.WaitGoroutines(t, goroutines)
}

// TestTransientFaults makes writes and reads hit EINTR, EAGAIN, short
// transfers and late completions: the engines retry and resume, and the
// caller sees nothing but correct data.
func TestTransientFaults(t *testing.T) {
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			plan := faults.NewPlan(
				faults.Transient(direct.OpWrite, 20, syscall.EINTR),
				faults.Transient(direct.OpWrite, 20, syscall.EAGAIN),
				faults.Short(direct.OpWrite, 20, 4096),
				faults.Late(direct.OpWrite, 5, 5*time.Millisecond),
				faults.Transient(direct.OpSync, 3, syscall.EINTR),
			)
			path := filepath.Join(testenv.Dir(t), "t.blob")
			w, err := blobio.Create(path, &blobio.Options{IO: p, BufferSize: 16 << 10, Buffers: 3, Faults: plan})
			require.NoError(t, err)
			var blobs [][]byte
			var offs []int64
			for i := range 3000 {
				v := content(i, i%700)
				off, err := w.WriteBlob(v)
				require.NoError(t, err)
				blobs, offs = append(blobs, v), append(offs, off)
				if i%500 == 499 {
					require.NoError(t, w.Sync())
				}
			}
			require.NoError(t, w.Close())
			checkBlobs(t, path, w.Synced(), blobs, offs)
			got := plan.Injected()
			t.Logf("injected %v", got)
			for _, k := range []string{"EINTR", "EAGAIN", "short", "late"} {
				assert.Positive(t, got[k], "no %s injected", k)
			}
		})
	}
}
