package appender

import (
	"bytes"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/internal/filetest"
)

// batchFake is the fake File whose queue is a direct.Batcher: a
// filetest.CountQueue over the fake's queue.
type batchFake struct {
	*fakeFile
	bq *filetest.CountQueue
}

func (f *batchFake) NewQueue(o *direct.QueueOptions) (direct.Queue, error) {
	if _, err := f.fakeFile.NewQueue(o); err != nil {
		return nil, err
	}
	f.bq = filetest.NewCountQueue(f.q) // the fake is no Batcher: a Submit each
	return f.bq, nil
}

// lostAfterFailedSync returns an Appender on a batchFake whose Sync
// failed with EIO after several buffers were written since the last
// one: those buffers are lost, to be written again. It returns the
// stream and how many buffers are lost.
func lostAfterFailedSync(t *testing.T) (*Appender, *batchFake, []byte, int) {
	t.Helper()
	f := &batchFake{fakeFile: newFake(512, 512, true)}
	a, err := New(f, Options{BufferSize: 4 * kib, Buffers: 8})
	require.NoError(t, err)
	want := stream(10_000, 4)
	write(t, a, want)
	require.NoError(t, a.Sync())
	more := stream(20_000, 5)
	write(t, a, more)
	want = append(want, more...)
	failing := true
	f.fail = func(r request) error {
		if r.op == direct.OpSync && failing {
			return syscall.EIO
		}
		return nil
	}
	require.ErrorIs(t, a.Sync(), syscall.EIO)
	failing = false
	n := 0
	for i, s := range a.slots {
		if i != a.cur && (s.state == lost || s.state == pending) {
			n++
		}
	}
	require.Greater(t, n, 2, "buffers to write again")
	return a, f, want, n
}

// TestFakeRewriteBatch: the buffers a failed Sync left to write again go
// to the queue as one batch, not one Submit each, and the file ends up
// holding the stream.
func TestFakeRewriteBatch(t *testing.T) {
	a, f, want, n := lostAfterFailedSync(t)
	_, batches := f.bq.Counts()
	assert.Empty(t, batches)
	require.NoError(t, a.Sync())
	_, batches = f.bq.Counts()
	assert.Equal(t, []int{n}, batches, "the lost buffers, one batch")
	require.NoError(t, a.Close())
	assert.True(t, bytes.Equal(want, f.data))
}

// TestFakeRewriteBatchRefused: when the queue takes one of the buffers to
// write again and refuses the rest, Sync returns the refusal, which is
// sticky (writing the same bytes again would be refused the same way);
// the write accepted completes, nothing is left in flight, and Close
// returns the error, closes the queue and the file and gives the
// buffers back.
func TestFakeRewriteBatchRefused(t *testing.T) {
	a, f, _, n := lostAfterFailedSync(t)
	f.bq.Refuse(1)
	before := len(f.q.writes())
	require.ErrorIs(t, a.Sync(), filetest.ErrRefused)
	_, batches := f.bq.Counts()
	assert.Equal(t, []int{n}, batches)
	assert.Len(t, f.q.writes()[before:], 1, "the write accepted")
	assert.Zero(t, a.inflight, "writes in flight")
	require.ErrorIs(t, a.Err(), filetest.ErrRefused, "sticky")
	require.ErrorIs(t, a.Close(), filetest.ErrRefused)
	assert.True(t, f.q.closed, "queue closed")
	assert.Empty(t, f.q.held, "requests in flight")
	assert.Nil(t, a.slots, "buffers given back")
	assert.Nil(t, a.slab, "slab freed")
	assert.Equal(t, "close", f.calls[len(f.calls)-1])
}
