package direct_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/internal/testenv"
)

// uringFile opens a direct file with an io_uring queue, skipping where
// either is missing.
func uringFile(t *testing.T, depth int) (*direct.File, direct.Queue) {
	t.Helper()
	if err := direct.URingError(); err != nil {
		t.Skipf("io_uring unavailable: %v", err)
	}
	f := openOrSkip(t, filepath.Join(testenv.Dir(t), "u"), os.O_RDWR|os.O_CREATE)
	t.Cleanup(func() { f.Close() })
	return f, newQueue(t, f, direct.EngineURing, depth)
}

func alignedBlocks(t *testing.T, f *direct.File, n int, seed byte) []byte {
	t.Helper()
	b, err := aligned.New(n*f.Alignment().Block(), f.Alignment().Memory)
	require.NoError(t, err)
	t.Cleanup(b.Free)
	for i := range b.Bytes() {
		b.Bytes()[i] = seed + byte(i/512)
	}
	return b.Bytes()
}

func do(t *testing.T, q direct.Queue, r direct.Request) direct.Completion {
	t.Helper()
	done := make(chan direct.Completion, 1)
	r.Done = done
	require.NoError(t, q.Submit(r))
	return q.Await(done)
}

func TestURingInjectedErrors(t *testing.T) {
	f, q := uringFile(t, 2)
	p := alignedBlocks(t, f, 2, 1)
	for _, errno := range []syscall.Errno{syscall.EIO, syscall.ENOSPC, syscall.EBADF} {
		var calls atomic.Int32
		direct.SetResultHook(q, func(r *direct.Request, done int, res int32) int32 {
			if calls.Add(1) == 1 {
				return -int32(errno)
			}
			return res
		})
		for _, op := range []direct.Op{direct.OpWrite, direct.OpRead, direct.OpSync} {
			calls.Store(0)
			c := do(t, q, direct.Request{Op: op, Buf: p, Token: 5})
			assert.ErrorIs(t, c.Err, errno, "%v", op)
			assert.Equal(t, uint64(5), c.Token)
			assert.Zero(t, c.N)
			var pe *os.PathError
			assert.ErrorAs(t, c.Err, &pe)
		}
	}
	// The queue is still usable after failed requests.
	direct.SetResultHook(q, nil)
	c := do(t, q, direct.Request{Op: direct.OpWrite, Buf: p})
	require.NoError(t, c.Err)
	assert.Equal(t, len(p), c.N)
}

func TestURingEINVALIsNotSupported(t *testing.T) {
	f, q := uringFile(t, 1)
	p := alignedBlocks(t, f, 1, 1)
	direct.SetResultHook(q, func(*direct.Request, int, int32) int32 { return -int32(syscall.EINVAL) })
	c := do(t, q, direct.Request{Op: direct.OpWrite, Buf: p})
	assert.ErrorIs(t, c.Err, direct.ErrNotSupported)
	assert.ErrorIs(t, c.Err, syscall.EINVAL)
}

// TestURingShortTransfers pretends the kernel moved only part of each
// request, and checks the engine moves the rest.
func TestURingShortTransfers(t *testing.T) {
	f, q := uringFile(t, 4)
	blk := f.Alignment().Block()
	want := alignedBlocks(t, f, 8, 3)
	var resubmits atomic.Int32
	direct.SetResultHook(q, func(r *direct.Request, done int, res int32) int32 {
		if r.Op != direct.OpSync && done == 0 && res > int32(blk) {
			resubmits.Add(1)
			return int32(blk) // one block of eight
		}
		return res
	})
	c := do(t, q, direct.Request{Op: direct.OpWrite, Buf: want})
	require.NoError(t, c.Err)
	assert.Equal(t, len(want), c.N)

	got := alignedBlocks(t, f, 8, 0)
	c = do(t, q, direct.Request{Op: direct.OpRead, Buf: got})
	require.NoError(t, c.Err)
	assert.Equal(t, len(want), c.N)
	assert.True(t, bytes.Equal(want, got))
	assert.Equal(t, int32(2), resubmits.Load())

	// A write cut off the alignment cannot be resumed with O_DIRECT.
	if f.Alignment().Offset > 1 {
		direct.SetResultHook(q, func(r *direct.Request, done int, res int32) int32 { return 100 })
		c = do(t, q, direct.Request{Op: direct.OpWrite, Buf: want})
		assert.ErrorIs(t, c.Err, io.ErrShortWrite)
		assert.Equal(t, 100, c.N)
		c = do(t, q, direct.Request{Op: direct.OpRead, Buf: got})
		assert.ErrorIs(t, c.Err, io.EOF, "an unaligned short read is the end of the file")
	}
}

func TestURingRetriesEAGAIN(t *testing.T) {
	f, q := uringFile(t, 1)
	p := alignedBlocks(t, f, 1, 1)
	var calls atomic.Int32
	direct.SetResultHook(q, func(_ *direct.Request, _ int, res int32) int32 {
		if calls.Add(1) <= 3 {
			return -int32(syscall.EAGAIN)
		}
		return res
	})
	c := do(t, q, direct.Request{Op: direct.OpWrite, Buf: p})
	require.NoError(t, c.Err)
	assert.Equal(t, int32(4), calls.Load())

	// Forever EAGAIN gives up with it.
	direct.SetResultHook(q, func(*direct.Request, int, int32) int32 { return -int32(syscall.EAGAIN) })
	c = do(t, q, direct.Request{Op: direct.OpWrite, Buf: p})
	assert.ErrorIs(t, c.Err, syscall.EAGAIN)
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

func TestQueueCloseReleasesEverything(t *testing.T) {
	for _, kind := range engines(t) {
		t.Run(kind.String(), func(t *testing.T) {
			f := openOrSkip(t, filepath.Join(testenv.Dir(t), "u"), os.O_RDWR|os.O_CREATE)
			defer f.Close()
			p := alignedBlocks(t, f, 1, 1)
			fds, goroutines := openFDs(t), runtime.NumGoroutine()
			for i := range 50 {
				q, err := f.NewQueue(&direct.QueueOptions{Depth: 8, Engine: kind})
				require.NoError(t, err)
				if i == 0 && kind == direct.EngineURing {
					maps, err := os.ReadFile("/proc/self/maps")
					require.NoError(t, err)
					require.Contains(t, string(maps), "io_uring", "the leak check below would see nothing")
				}
				done := make(chan direct.Completion, 1)
				require.NoError(t, q.Submit(direct.Request{Op: direct.OpWrite, Buf: p, Done: done}))
				require.NoError(t, q.Await(done).Err)
				require.NoError(t, q.Close())
			}
			assert.Equal(t, fds, openFDs(t), "file descriptors leaked")
			for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > goroutines && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			assert.LessOrEqual(t, runtime.NumGoroutine(), goroutines, "goroutines leaked")
			maps, err := os.ReadFile("/proc/self/maps")
			require.NoError(t, err)
			assert.NotContains(t, string(maps), "io_uring", "a ring mapping outlived its queue")
		})
	}
}

func TestURingErrorNamesTheCause(t *testing.T) {
	if testenv.Child() != "deny-uring" {
		out, err := testenv.RunChild(t, t.Name(), "deny-uring")
		require.NoError(t, err, "child:\n%s", out)
		require.Contains(t, string(out), "--- PASS", "child:\n%s", out)
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
