package blobio_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestCreateContext: Create on a spent Pool waits for a buffer until its
// Context ends, then fails with the context's error and leaves no file;
// once a buffer comes back, a waiting Create gets it.
func TestCreateContext(t *testing.T) {
	dir := testenv.Dir(t)
	pool, err := aligned.NewPool(aligned.DefaultBufferSize, 4096, aligned.DefaultBufferSize)
	require.NoError(t, err)
	defer pool.Close()
	held, err := pool.Get(context.Background())
	require.NoError(t, err)

	create := func(name string, ctx context.Context) error {
		done := make(chan error, 1)
		go func() {
			w, err := blobio.Create(filepath.Join(dir, name), &blobio.Options{Pool: pool, Context: ctx})
			if err == nil {
				err = w.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatalf("Create(%s) still waits for the pool", name)
			return nil
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err = create("deadline.blob", ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	err = create("canceled.blob", ctx)
	require.ErrorIs(t, err, context.Canceled)

	err = create("done.blob", ctx)
	require.ErrorIs(t, err, context.Canceled, "a done context fails Create")

	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, ents, "a Create that gave up left a file")

	// Patience is rewarded.
	time.AfterFunc(20*time.Millisecond, func() { pool.Put(held) })
	require.NoError(t, create("waited.blob", context.Background()))
	assert.Equal(t, 0, pool.Stats().InUse)
}
