package ephemeral_test

import (
	"bytes"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/ephemeral"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/faults"
	"github.com/dio-storage/dio/internal/filetest"
	"github.com/dio-storage/dio/internal/testenv"
)

// faultFile is an ephemeral.File under a fault plan. Every byte Write
// acknowledges is the file's: on disk, or in the buffer whose write failed,
// which the file keeps.
type faultFile struct {
	f      *ephemeral.File
	data   func(i int) []byte
	mirror []byte
}

func (ff *faultFile) Append(i int) error {
	v := ff.data(i)
	n, err := ff.f.Write(v)
	ff.mirror = append(ff.mirror, v[:n]...)
	return err
}

func (ff *faultFile) Sync() error { return ff.f.Flush() }

func (ff *faultFile) Finish(t *testing.T, errno syscall.Errno) {
	if errno != 0 {
		_, err := ff.f.WriteBlob([]byte("x"))
		assert.ErrorIs(t, err, errno, "the error is sticky for WriteBlob")
	}
	assert.Equal(t, int64(len(ff.mirror)), ff.f.Size())
	got := make([]byte, len(ff.mirror))
	n, err := ff.f.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, len(ff.mirror), n)
	require.True(t, bytes.Equal(ff.mirror, got), "bytes acknowledged before the fault were lost")
	require.NoError(t, ff.f.Close())
	t.Logf("%d bytes acknowledged and read back", len(ff.mirror))
}

// TestWriteFailure fails the n-th write with EIO or ENOSPC: the error
// stays while its cause does, every byte appended before it still reads
// back, and the buffers go back to the pool; when the cause passes,
// writing goes on and every byte Write counted reads back.
func TestWriteFailure(t *testing.T) {
	filetest.FaultTest{
		Open: func(t *testing.T, dir string, p fallback.Policy, plan *faults.Plan) (filetest.Writer, *aligned.Pool) {
			pool, err := aligned.NewPool(8<<10, 4096, 3*(8<<10))
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			f, err := ephemeral.Create(dir, &ephemeral.Options{IO: p, Pool: pool, Buffers: 3, Faults: plan})
			require.NoError(t, err)
			return &faultFile{f: f, data: func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 100) }}, pool
		},
		Appends: 10000,
	}.Run(t, append(filetest.Failures(direct.OpWrite), filetest.Recovering(3, direct.OpWrite)...))
}

// TestTransientFaults: retries and resumed short transfers of the writes
// are invisible to readers.
func TestTransientFaults(t *testing.T) {
	filetest.FaultTest{
		Open: func(t *testing.T, dir string, p fallback.Policy, plan *faults.Plan) (filetest.Writer, *aligned.Pool) {
			f, err := ephemeral.Create(dir, &ephemeral.Options{IO: p, BufferSize: 16 << 10, Buffers: 4, Faults: plan})
			require.NoError(t, err)
			return &faultFile{f: f, data: func(i int) []byte { return bytes.Repeat([]byte{byte(i * 3)}, 1+i%200) }}, nil
		},
		Appends: 5000,
	}.Run(t, []filetest.Fault{{Name: "transient", Rules: filetest.TransientWrites(10, 3), Kinds: []string{"EINTR", "EAGAIN", "short"}}})
}

// failAhead fails, with EIO, the first read of a whole read buffer at each
// of times offsets at or past from: a read-ahead fails, and the foreground
// read that replaces it, at the same offset, succeeds. Below from lies the
// reader's first whole read, a foreground read submitted in one batch with
// its read-ahead: the io_uring engine injects faults as reads complete, in
// whichever order the device completes them, so counting reads from the
// start could fail the foreground one. Past it, every new offset is first
// read by a read-ahead.
type failAhead struct {
	mu     sync.Mutex
	from   int64
	times  int
	failed map[int64]bool
}

func (a *failAhead) Inject(op direct.Op, off int64, n int) (direct.Fault, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if op != direct.OpRead || n != 512<<10 || off < a.from || a.failed[off] || len(a.failed) == a.times {
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
	fail := &failAhead{from: 1 << 20, times: 2, failed: map[int64]bool{}}
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
