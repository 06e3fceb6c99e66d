package appender

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/fallback"
)

// TestNewContext: New waits for a spent Pool's buffer only until its
// Context ends, and a Context already done fails New, Pool or not.
func TestNewContext(t *testing.T) {
	f, _ := open(t, fallback.Auto)
	defer f.Close()
	pool, err := aligned.NewPool(aligned.DefaultBufferSize, 4096, aligned.DefaultBufferSize)
	require.NoError(t, err)
	defer pool.Close()
	held, err := pool.Get(context.Background())
	require.NoError(t, err)
	defer pool.Put(held)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = New(f, Options{Pool: pool, Context: ctx})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Error(t, ctx.Err(), "New gave up before the deadline")

	_, err = New(f, Options{Context: ctx})
	require.ErrorIs(t, err, context.DeadlineExceeded, "a done context fails New without a Pool too")
	assert.Equal(t, 1, pool.Stats().InUse, "a failed New kept a buffer")
}
