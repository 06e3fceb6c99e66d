package direct_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/testenv"
)

// uringFile opens a direct file with an io_uring queue, skipping where
// either is missing.
func uringFile(t *testing.T, depth int) (*direct.File, direct.Queue) {
	t.Helper()
	if err := fallback.URingErrorAt(testenv.Dir(t)); err != nil {
		t.Skipf("io_uring unavailable: %v", err)
	}
	f := openOrSkip(t, filepath.Join(testenv.Dir(t), "u"), os.O_RDWR|os.O_CREATE)
	t.Cleanup(func() { f.Close() })
	return f, newQueue(t, f, direct.EngineURing, depth)
}

func TestURingCloseWaitsForInFlight(t *testing.T) {
	f, q := uringFile(t, 4)
	p := alignedBlocks(t, f, 16, 1)
	done := make(chan direct.Completion, 4)
	blk := f.Alignment().Block()
	for i := range 4 {
		require.NoError(t, q.Submit(direct.Request{Op: direct.OpWrite, Buf: p[i*4*blk : (i+1)*4*blk], Off: int64(i * 4 * blk), Done: done}))
	}
	require.NoError(t, q.Close())
	require.Len(t, done, 4, "Close returned before delivering every completion")
	for range 4 {
		assert.NoError(t, (<-done).Err)
	}
}

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

// TestQueueCloseReleasesEverything: queues come and go without leaving a
// descriptor, a goroutine or a ring behind; on io_uring they cost no ring
// of their own.
func TestQueueCloseReleasesEverything(t *testing.T) {
	for _, kind := range engines(t) {
		t.Run(kind.String(), func(t *testing.T) {
			f := openOrSkip(t, filepath.Join(testenv.Dir(t), "u"), os.O_RDWR|os.O_CREATE)
			defer f.Close()
			p := alignedBlocks(t, f, 1, 1)
			_ = direct.URingError() // the process's first ring, if any, exists from here on
			fds, goroutines, rings := openFDs(t), runtime.NumGoroutine(), direct.RingsCreated()
			for range 50 {
				q, err := f.NewQueue(&direct.QueueOptions{Depth: 8, Engine: kind})
				require.NoError(t, err)
				done := make(chan direct.Completion, 1)
				require.NoError(t, q.Submit(direct.Request{Op: direct.OpWrite, Buf: p, Done: done}))
				require.NoError(t, q.Await(done).Err)
				require.NoError(t, q.Close())
			}
			assert.Equal(t, fds, openFDs(t), "file descriptors leaked")
			testenv.WaitGoroutines(t, goroutines)
			assert.Equal(t, rings, direct.RingsCreated(), "a queue at a time set up rings of its own")
		})
	}
}

func TestURingErrorNamesTheCause(t *testing.T) {
	if !testenv.InChild(t, "deny-uring") {
		return
	}
	require.NoError(t, testenv.DenyURing())
	err := direct.URingError()
	require.ErrorIs(t, err, syscall.EPERM)
	assert.True(t, strings.HasPrefix(err.Error(), "io_uring_setup: "), err.Error())

	f, err := direct.Open(filepath.Join(testenv.Dir(t), "u"), os.O_RDWR|os.O_CREATE, 0o644)
	if testenv.RejectsDirect() {
		require.ErrorIs(t, err, direct.ErrNotSupported)
		return // no direct file to queue on; the error above is what counts
	}
	require.NoError(t, err)
	defer f.Close()
	q, err := f.NewQueue(nil)
	require.NoError(t, err)
	defer q.Close()
	assert.Equal(t, direct.EnginePwrite, q.Engine(), "EngineAuto without io_uring")
	_, err = f.NewQueue(&direct.QueueOptions{Engine: direct.EngineURing})
	assert.ErrorIs(t, err, syscall.EPERM, "EngineURing asked for explicitly")
}

// TestURingAwaitAfterClose: waiting on a closed ring reports it rather than
// blocking in io_uring_enter on a dead descriptor.
func TestURingAwaitAfterClose(t *testing.T) {
	_, q := uringFile(t, 1)
	require.NoError(t, q.Close())
	got := make(chan direct.Completion, 1)
	go func() { got <- q.Await(make(chan direct.Completion, 1)) }()
	select {
	case c := <-got:
		assert.ErrorIs(t, c.Err, direct.ErrQueueClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("Await on a closed queue blocked")
	}
}

// TestURingRegisterBuffersRefused: a queue on a shared ring refuses fixed
// buffers with an error matching errors.ErrUnsupported and keeps working
// with plain requests, as internal/appender expects of a refusal.
func TestURingRegisterBuffersRefused(t *testing.T) {
	f, q := uringFile(t, 2)
	a := alignedBlocks(t, f, 4, 1)
	err := q.(direct.BufferRegistrar).RegisterBuffers([][]byte{a})
	require.ErrorIs(t, err, errors.ErrUnsupported)
	c := do(t, q, direct.Request{Op: direct.OpWrite, Buf: a})
	require.NoError(t, c.Err)
	b := alignedBlocks(t, f, 4, 0)
	c = do(t, q, direct.Request{Op: direct.OpRead, Buf: b})
	require.NoError(t, c.Err)
	assert.Equal(t, a, b)
}
