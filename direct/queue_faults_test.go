package direct_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/faults"
	"github.com/dio-storage/dio/internal/testenv"
)

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

// faultQueue opens a direct file with a queue of the given engine whose
// system calls go through plan.
func faultQueue(t *testing.T, kind direct.EngineKind, depth int, plan *faults.Plan) (*direct.File, direct.Queue) {
	t.Helper()
	f := openOrSkip(t, filepath.Join(testenv.Dir(t), "u"), os.O_RDWR|os.O_CREATE)
	t.Cleanup(func() { f.Close() })
	q, err := f.NewQueue(&direct.QueueOptions{Depth: depth, Engine: kind, Faults: plan})
	require.NoError(t, err)
	t.Cleanup(func() { q.Close() })
	return f, q
}

// opName is what an engine's errors name op: the system call of the
// pwrite engine, the io_uring opcode of the io_uring engine.
func opName(kind direct.EngineKind, op direct.Op) string {
	call := map[direct.Op]string{direct.OpWrite: "pwrite", direct.OpRead: "pread", direct.OpSync: "fdatasync"}[op]
	if kind == direct.EngineURing {
		call = "io_uring " + map[direct.Op]string{direct.OpWrite: "write", direct.OpRead: "read", direct.OpSync: "fdatasync"}[op]
	}
	return call
}

func TestQueueInjectedErrors(t *testing.T) {
	for _, kind := range engines(t) {
		for _, errno := range []syscall.Errno{syscall.EIO, syscall.ENOSPC, syscall.EBADF} {
			for _, op := range []direct.Op{direct.OpWrite, direct.OpRead, direct.OpSync} {
				t.Run(fmt.Sprintf("%v/%v/%v", kind, errno, op), func(t *testing.T) {
					plan := faults.NewPlan(faults.Rule{Op: op, Times: 1, Fault: direct.Fault{Err: errno}})
					f, q := faultQueue(t, kind, 2, plan)
					p := alignedBlocks(t, f, 2, 1)
					c := do(t, q, direct.Request{Op: op, Buf: p, Token: 5})
					assert.ErrorIs(t, c.Err, errno)
					assert.Equal(t, uint64(5), c.Token)
					assert.Zero(t, c.N)
					var pe *os.PathError
					if assert.ErrorAs(t, c.Err, &pe) {
						assert.Equal(t, opName(kind, op), pe.Op, "the error names what the engine did")
					}
					// The queue is still usable after a failed request.
					c = do(t, q, direct.Request{Op: direct.OpWrite, Buf: p})
					require.NoError(t, c.Err)
					assert.Equal(t, len(p), c.N)
				})
			}
		}
	}
}

func TestQueueEINVALIsNotSupported(t *testing.T) {
	for _, kind := range engines(t) {
		plan := faults.NewPlan(faults.Fail(direct.OpWrite, 0, syscall.EINVAL))
		f, q := faultQueue(t, kind, 1, plan)
		c := do(t, q, direct.Request{Op: direct.OpWrite, Buf: alignedBlocks(t, f, 1, 1)})
		assert.ErrorIs(t, c.Err, direct.ErrNotSupported, "%v", kind)
		assert.ErrorIs(t, c.Err, syscall.EINVAL)
	}
}

// TestQueueShortTransfers makes the first call of each request move only
// one block of eight, and checks the engine moves the rest.
func TestQueueShortTransfers(t *testing.T) {
	for _, kind := range engines(t) {
		t.Run(kind.String(), func(t *testing.T) {
			probe := openOrSkip(t, filepath.Join(testenv.Dir(t), "p"), os.O_RDWR|os.O_CREATE)
			blk := probe.Alignment().Block()
			probe.Close()
			plan := faults.NewPlan(faults.Short(direct.OpWrite, 1, blk), faults.Short(direct.OpRead, 1, blk))
			f, q := faultQueue(t, kind, 4, plan)
			want := alignedBlocks(t, f, 8, 3)
			c := do(t, q, direct.Request{Op: direct.OpWrite, Buf: want})
			require.NoError(t, c.Err)
			assert.Equal(t, len(want), c.N)
			got := alignedBlocks(t, f, 8, 0)
			c = do(t, q, direct.Request{Op: direct.OpRead, Buf: got})
			require.NoError(t, c.Err)
			assert.Equal(t, len(want), c.N)
			assert.True(t, bytes.Equal(want, got))
			assert.Equal(t, 2, plan.Injected()["short"])
		})
	}
}

// TestQueueUnalignedShortTransfer: a direct transfer cut off the alignment
// cannot be resumed: a write fails, a read ends (the end of the file).
func TestQueueUnalignedShortTransfer(t *testing.T) {
	for _, kind := range engines(t) {
		plan := faults.NewPlan(faults.Rule{Fault: direct.Fault{Short: 100}})
		f, q := faultQueue(t, kind, 1, plan)
		if f.Alignment().Offset == 1 {
			t.Skip("no alignment to break")
		}
		p := alignedBlocks(t, f, 2, 1)
		c := do(t, q, direct.Request{Op: direct.OpWrite, Buf: p})
		assert.ErrorIs(t, c.Err, io.ErrShortWrite, "%v", kind)
		assert.Equal(t, 100, c.N)
		c = do(t, q, direct.Request{Op: direct.OpRead, Buf: p})
		assert.ErrorIs(t, c.Err, io.EOF, "%v", kind)
	}
}

func TestQueueRetriesEAGAIN(t *testing.T) {
	for _, kind := range engines(t) {
		plan := faults.NewPlan(faults.Transient(direct.OpWrite, 3, syscall.EAGAIN))
		f, q := faultQueue(t, kind, 1, plan)
		p := alignedBlocks(t, f, 1, 1)
		c := do(t, q, direct.Request{Op: direct.OpWrite, Buf: p})
		require.NoError(t, c.Err, "%v", kind)
		assert.Equal(t, 3, plan.Injected()["EAGAIN"])

		// EAGAIN forever gives up with it.
		plan = faults.NewPlan(faults.Fail(direct.OpWrite, 0, syscall.EAGAIN))
		_, q = faultQueue(t, kind, 1, plan)
		c = do(t, q, direct.Request{Op: direct.OpWrite, Buf: p})
		assert.ErrorIs(t, c.Err, syscall.EAGAIN, "%v", kind)
	}
}

// TestFileWithFaults: a File from WithFaults injects into its own ReadAt,
// WriteAt and Sync and into its queues, under the same retry and resume
// rules as a queue's (a transfer cut off the alignment: io.ErrShortWrite
// for a write, io.EOF for a read); the File it came from and a queue given
// Faults of its own do not consult it.
func TestFileWithFaults(t *testing.T) {
	f := openOrSkip(t, filepath.Join(testenv.Dir(t), "f"), os.O_RDWR|os.O_CREATE)
	defer f.Close()
	p := alignedBlocks(t, f, 2, 1)

	plan := faults.NewPlan(faults.Transient(direct.OpWrite, 2, syscall.EINTR), faults.Fail(direct.OpSync, 0, syscall.EIO))
	g := f.WithFaults(plan)
	n, err := g.WriteAt(p, 0)
	require.NoError(t, err)
	assert.Equal(t, len(p), n)
	assert.ErrorIs(t, g.Sync(), syscall.EIO)
	require.NoError(t, f.Sync(), "the File WithFaults came from consulted its plan")
	assert.Equal(t, map[string]int{"EINTR": 2, "EIO": 1}, plan.Injected())

	if f.Alignment().Offset > 1 {
		cut := f.WithFaults(faults.NewPlan(faults.Rule{Fault: direct.Fault{Short: 100}}))
		n, err = cut.WriteAt(p, 0)
		assert.ErrorIs(t, err, io.ErrShortWrite)
		assert.Equal(t, 100, n)
		n, err = cut.ReadAt(p, 0)
		assert.ErrorIs(t, err, io.EOF)
		assert.Equal(t, 100, n)
	}

	for _, kind := range engines(t) {
		plan := faults.NewPlan(faults.Fail(direct.OpRead, 0, syscall.EIO))
		q, err := f.WithFaults(plan).NewQueue(&direct.QueueOptions{Engine: kind})
		require.NoError(t, err)
		c := do(t, q, direct.Request{Op: direct.OpRead, Buf: p})
		assert.ErrorIs(t, c.Err, syscall.EIO, "%v", kind)
		require.NoError(t, q.Close())

		own := faults.NewPlan()
		q, err = f.WithFaults(plan).NewQueue(&direct.QueueOptions{Engine: kind, Faults: own})
		require.NoError(t, err)
		c = do(t, q, direct.Request{Op: direct.OpRead, Buf: p})
		require.NoError(t, c.Err, "%v: QueueOptions.Faults did not override the File's", kind)
		require.NoError(t, q.Close())
		assert.Equal(t, 1, plan.Injected()["EIO"], "%v", kind)
	}
}

// TestBufferedWithFaults: a page-cache File injects the same way, and a
// short transfer there is resumed, since no alignment forbids it.
func TestBufferedWithFaults(t *testing.T) {
	o, err := os.Create(filepath.Join(testenv.Dir(t), "f"))
	require.NoError(t, err)
	f := direct.Buffered(o)
	defer f.Close()
	plan := faults.NewPlan(faults.Short(direct.OpWrite, 1, 3), faults.Short(direct.OpRead, 1, 2))
	g := f.WithFaults(plan)
	n, err := g.WriteAt([]byte("hello, disk"), 5)
	require.NoError(t, err)
	assert.Equal(t, 11, n)
	got := make([]byte, 11)
	n, err = g.ReadAt(got, 5)
	require.NoError(t, err)
	assert.Equal(t, "hello, disk", string(got[:n]))
	assert.Equal(t, 2, plan.Injected()["short"])
	n, err = g.ReadAt(got, 10)
	assert.ErrorIs(t, err, io.EOF)
	assert.Equal(t, 6, n)
}
