package blobio_test

import (
	"bytes"
	"context"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/faults"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestRetryPolicy: under Options.Retry a write that fails with ENOSPC is
// reported to OnRetry and retried with backoff, never returned, while
// the cause passes; and when it lasts, the call returns ENOSPC once the
// policy's Context ends, having kept every byte acknowledged before.
func TestRetryPolicy(t *testing.T) {
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			var retries atomic.Int64
			onRetry := func(err error) {
				assert.ErrorIs(t, err, syscall.ENOSPC)
				retries.Add(1)
			}

			// A fault that passes: nothing surfaces.
			path := filepath.Join(testenv.Dir(t), "passes.blob")
			plan := faults.NewPlan(faults.Rule{Op: direct.OpWrite, After: 4, Times: 5, Fault: direct.Fault{Err: syscall.ENOSPC}})
			w, err := blobio.Create(path, &blobio.Options{IO: p, BufferSize: 8 << 10, Buffers: 3, Faults: plan,
				Retry: &blobio.RetryPolicy{Context: context.Background(), OnRetry: onRetry, MinDelay: time.Millisecond, MaxDelay: 4 * time.Millisecond}})
			require.NoError(t, err)
			var want [][]byte
			var offs []int64
			for i := range 1500 {
				v := content(i, 100+i%300)
				off, err := w.WriteBlob(v)
				require.NoError(t, err, "blob %d: the policy retries, the caller sees nothing", i)
				want, offs = append(want, v), append(offs, off)
				if i%50 == 49 {
					require.NoError(t, w.Sync())
				}
			}
			require.NoError(t, w.Close())
			require.NotZero(t, plan.Injected()["ENOSPC"])
			require.NotZero(t, retries.Load(), "OnRetry told of the failures")
			checkBlobs(t, path, w.Synced(), want, offs)

			// A fault that lasts: the call returns once the Context ends.
			retries.Store(0)
			path = filepath.Join(testenv.Dir(t), "lasts.blob")
			plan = faults.NewPlan(faults.Rule{Op: direct.OpWrite, After: 4, Fault: direct.Fault{Err: syscall.ENOSPC}})
			// The Context ends at the fifth report, as a service's would
			// at shutdown: the call in the middle of retrying returns.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			const reports = 5
			endAt := func(err error) {
				if onRetry(err); retries.Load() == reports {
					cancel()
				}
			}
			w, err = blobio.Create(path, &blobio.Options{IO: p, BufferSize: 8 << 10, Buffers: 3, Faults: plan,
				Retry: &blobio.RetryPolicy{Context: ctx, OnRetry: endAt, MinDelay: time.Millisecond, MaxDelay: 4 * time.Millisecond}})
			require.NoError(t, err)
			want, offs = nil, nil
			start := time.Now()
			var failure error
			for i := 0; failure == nil; i++ {
				v := content(i, 100+i%300)
				off, err := w.WriteBlob(v)
				if failure = err; err == nil {
					want, offs = append(want, v), append(offs, off)
					if i%50 == 49 {
						failure = w.Sync()
					}
				}
				require.Less(t, i, 100_000, "the fault never surfaced")
			}
			require.ErrorIs(t, failure, syscall.ENOSPC, "returned once the Context ended")
			require.ErrorIs(t, ctx.Err(), context.Canceled)
			assert.Less(t, time.Since(start), 10*time.Second)
			assert.Equal(t, int64(reports), retries.Load(), "each failure reported while retrying, none after the Context ended")
			synced := w.Synced()
			assert.ErrorIs(t, w.Sync(), syscall.ENOSPC, "a policy whose Context ended retries no more")
			assert.ErrorIs(t, w.Close(), syscall.ENOSPC)
			r, err := blobio.Open(path, nil)
			require.NoError(t, err)
			defer r.Close()
			for i, off := range offs {
				if off+int64(len(want[i])) > synced {
					break
				}
				got, err := r.ReadBlob(off, nil)
				require.NoError(t, err)
				require.True(t, bytes.Equal(want[i], got), "synced blob %d", i)
			}
		})
	}
}
