package direct_test

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/internal/testenv"
)

// uringFile opens a direct file with an io_uring queue, skipping where
// either is missing.
func uringFile(t *testing.T, depth int) (*direct.File, direct.Queue) {
	t.Helper()
	if err := direct.URingErrorAt(testenv.Dir(t)); err != nil {
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
			testenv.WaitGoroutines(t, goroutines)
			maps, err := os.ReadFile("/proc/self/maps")
			require.NoError(t, err)
			assert.NotContains(t, string(maps), "io_uring", "a ring mapping outlived its queue")
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

// TestURingFixedBuffers registers buffers and checks that requests inside
// them go out as READ_FIXED and WRITE_FIXED and move the right bytes.
func TestURingFixedBuffers(t *testing.T) {
	f, q := uringFile(t, 2)
	blk := f.Alignment().Block()
	a, b := alignedBlocks(t, f, 4, 1), alignedBlocks(t, f, 4, 0)
	require.NoError(t, q.(direct.BufferRegistrar).RegisterBuffers([][]byte{a, b}))
	assert.Error(t, q.(direct.BufferRegistrar).RegisterBuffers([][]byte{a}), "twice")
	want := bytes.Clone(a)
	c := do(t, q, direct.Request{Op: direct.OpWrite, Buf: a[blk:], Off: int64(blk)}) // inside a
	require.NoError(t, c.Err)
	c = do(t, q, direct.Request{Op: direct.OpRead, Buf: b, Off: 0})
	require.ErrorIs(t, c.Err, nil)
	assert.Equal(t, want[blk:], b[blk:])
	assert.Equal(t, 2, direct.FixedOps(q))
	plain := alignedBlocks(t, f, 1, 2) // not registered
	c = do(t, q, direct.Request{Op: direct.OpWrite, Buf: plain})
	require.NoError(t, c.Err)
	assert.Equal(t, 2, direct.FixedOps(q), "a buffer outside the registered ones goes out plain")
}

// TestURingFixedBuffersRefused lowers RLIMIT_MEMLOCK in a child process
// that has dropped CAP_IPC_LOCK, as an unprivileged service runs:
// registering more than the limit fails with ENOMEM, and the queue keeps
// working with plain requests.
func TestURingFixedBuffersRefused(t *testing.T) {
	if testenv.Child() == "" {
		uringFile(t, 1) // skips here, not in the child, where io_uring or O_DIRECT is out
	}
	if !testenv.InChild(t, "memlock") {
		return
	}
	runtime.LockOSThread() // capabilities are per thread; the ring is set up on this one
	require.NoError(t, testenv.DropIPCLock())
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: 64 << 10, Max: 64 << 10}))
	f, q := uringFile(t, 2)
	big, err := aligned.New(4<<20, 4096)
	require.NoError(t, err)
	defer big.Free()
	err = q.(direct.BufferRegistrar).RegisterBuffers([][]byte{big.Bytes()})
	require.ErrorIs(t, err, syscall.ENOMEM)
	c := do(t, q, direct.Request{Op: direct.OpWrite, Buf: big.Bytes()[:f.Alignment().Block()]})
	require.NoError(t, c.Err)
	assert.Zero(t, direct.FixedOps(q))
}
