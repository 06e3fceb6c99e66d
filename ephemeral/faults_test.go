package ephemeral_test

import (
	"bytes"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/ephemeral"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/faults"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestWriteFailure fails a write with EIO: the error is sticky, and every
// byte appended before it still reads back, from disk or from the buffer
// whose write failed, which the file keeps.
func TestWriteFailure(t *testing.T) {
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			goroutines := runtime.NumGoroutine()
			pool, err := aligned.NewPool(8<<10, 4096, 3*(8<<10))
			require.NoError(t, err)
			defer pool.Close()
			plan := faults.NewPlan(faults.Fail(direct.OpWrite, 5, syscall.EIO))
			f, err := ephemeral.Create(testenv.Dir(t), &ephemeral.Options{IO: p, Pool: pool, Buffers: 3, Faults: plan})
			require.NoError(t, err)
			var mirror []byte
			var failure error
			for i := 0; i < 10000 && failure == nil; i++ {
				v := bytes.Repeat([]byte{byte(i)}, 100)
				n, err := f.Write(v)
				mirror = append(mirror, v[:n]...)
				failure = err
			}
			require.ErrorIs(t, failure, syscall.EIO)
			_, err = f.Write([]byte("x"))
			assert.ErrorIs(t, err, syscall.EIO, "sticky")
			_, err = f.WriteBlob([]byte("x"))
			assert.ErrorIs(t, err, syscall.EIO, "sticky")
			assert.Equal(t, int64(len(mirror)), f.Size())

			got := make([]byte, len(mirror))
			n, err := f.ReadAt(got, 0)
			require.NoError(t, err)
			require.Equal(t, len(mirror), n)
			require.True(t, bytes.Equal(mirror, got), "bytes acknowledged before the failure were lost")
			require.NoError(t, f.Close())
			assert.Zero(t, pool.Stats().InUse, "buffers leaked")
			testenv.WaitGoroutines(t, goroutines)
			t.Logf("%d bytes acknowledged and read back after the fault; injected %v", len(mirror), plan.Injected())
		})
	}
}

// TestTransientFaults: retries and resumed short transfers on both the
// write and the read side are invisible to readers.
func TestTransientFaults(t *testing.T) {
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			plan := faults.NewPlan(
				faults.Transient(direct.OpWrite, 10, syscall.EINTR),
				faults.Transient(direct.OpWrite, 10, syscall.EAGAIN),
				faults.Short(direct.OpWrite, 10, 4096),
				faults.Late(direct.OpWrite, 3, 5*time.Millisecond),
			)
			f, err := ephemeral.Create(testenv.Dir(t), &ephemeral.Options{IO: p, BufferSize: 16 << 10, Buffers: 4, Faults: plan})
			require.NoError(t, err)
			defer f.Close()
			var mirror []byte
			for i := range 5000 {
				v := bytes.Repeat([]byte{byte(i * 3)}, 1+i%200)
				_, err := f.Write(v)
				require.NoError(t, err)
				mirror = append(mirror, v...)
			}
			got := make([]byte, len(mirror))
			_, err = f.ReadAt(got, 0)
			require.NoError(t, err)
			require.True(t, bytes.Equal(mirror, got))
			t.Logf("injected %v", plan.Injected())
			assert.Positive(t, plan.Injected()["EINTR"])
		})
	}
}

// failAhead fails, with EIO, the first read of a whole read buffer at each
// of times offsets, after skip such reads: a read-ahead fails, and the
// foreground read that replaces it, at the same offset, succeeds.
type failAhead struct {
	mu          sync.Mutex
	skip, times int
	failed      map[int64]bool
}

func (a *failAhead) Inject(op direct.Op, off int64, n int) (direct.Fault, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if op != direct.OpRead || n != 512<<10 || a.failed[off] {
		return direct.Fault{}, false
	}
	if a.skip > 0 {
		a.skip--
		return direct.Fault{}, false
	}
	if len(a.failed) == a.times {
		return direct.Fault{}, false
	}
	a.failed[off] = true
	return direct.Fault{Err: syscall.EIO}, true
}

// TestReadAheadFailure: an EIO on background reads does not fail the
// reader, which reads in the foreground instead, and every blob reads back.
func TestReadAheadFailure(t *testing.T) {
	if testenv.RejectsDirect() {
		t.Skip("the read-ahead failed here runs on the direct queue")
	}
	fail := &failAhead{skip: 1, times: 2, failed: map[int64]bool{}}
	f, err := ephemeral.Create(testenv.Dir(t), &ephemeral.Options{IO: fallback.Direct, Faults: fail})
	require.NoError(t, err)
	defer f.Close()
	var offs []int64
	for i := range 100000 {
		off, err := f.WriteBlob(bytes.Repeat([]byte{byte(i)}, 1+i%120))
		require.NoError(t, err)
		offs = append(offs, off)
	}
	require.NoError(t, f.Flush())
	var got []byte
	for i, off := range offs {
		got, err = f.ReadBlob(off, got)
		require.NoError(t, err, "blob %d", i)
		require.True(t, bytes.Equal(bytes.Repeat([]byte{byte(i)}, 1+i%120), got), "blob %d", i)
	}
	assert.Len(t, fail.failed, 2, "the background reads failed")
}
