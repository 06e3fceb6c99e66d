package ephemeral

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/filetest"
	"github.com/dio-storage/dio/internal/testenv"
)

// scanned returns a direct file holding n patterned bytes, all on disk,
// whose sequential window's queue is wrapped in a filetest.CountQueue.
func scanned(t *testing.T, n int) (*File, []byte, *filetest.CountQueue) {
	t.Helper()
	if testenv.RejectsDirect() {
		t.Skip("the window's reads counted here run on the direct queue")
	}
	f, err := Create(testenv.Dir(t), &Options{IO: fallback.Direct})
	require.NoError(t, err)
	want := make([]byte, n)
	for i := range want {
		want[i] = byte(i*5 + i>>12)
	}
	_, err = f.Write(want)
	require.NoError(t, err)
	require.NoError(t, f.Flush())
	var cq *filetest.CountQueue
	require.NoError(t, f.rd.win.SetQueue(func(q direct.Queue) direct.Queue {
		cq = filetest.NewCountQueue(q)
		return cq
	}))
	return f, want, cq
}

// scan reads f from off to its end in 4 KiB ReadAts, as a sequential
// reader does, and returns the first error.
func scan(f *File, got []byte, off int) error {
	for ; off < len(got); off += 4 << 10 {
		if _, err := f.ReadAt(got[off:min(off+4<<10, len(got))], int64(off)); err != nil {
			return err
		}
	}
	return nil
}

// TestWindowBatch: a reader that goes on where its random read (8 KiB)
// ended takes the sequential window, whose opening reads (64 and 128 KiB)
// go to the queue in one batch; every later read goes alone as the
// window moves on (256 KiB, then 512 KiB ones), up to the bytes the
// writer's buffers still hold.
func TestWindowBatch(t *testing.T) {
	f, want, q := scanned(t, 4<<20)
	defer f.Close()
	got := make([]byte, len(want))
	require.NoError(t, scan(f, got, 0))
	require.True(t, bytes.Equal(want, got), "the file's bytes")
	submits, batches := q.Counts()
	assert.Equal(t, []int{2}, batches, "the window's opening reads, one batch")
	_, inMemory := f.ap.Cached(0)
	opened := int64(8<<10 + 64<<10 + 128<<10)
	later := 1 + int((inMemory-opened-256<<10+512<<10-1)/(512<<10))
	require.Greater(t, later, 2)
	assert.Equal(t, later, submits, "reads one at a time")
}

// TestWindowBatchRefused: a window read the queue refuses is dropped,
// and the reader reads in the foreground instead, so the scan goes on
// correctly whether the queue refuses the opening batch's second read or
// both; nothing stays in flight, no buffer is held but the last random
// read's, and once the queue accepts again the window serves the scan.
// Close leaves no goroutine behind.
func TestWindowBatchRefused(t *testing.T) {
	goroutines := runtime.NumGoroutine()
	f, want, q := scanned(t, 3<<20)
	got := make([]byte, len(want))
	for _, refuse := range []int{1, 0} {
		q.Refuse(refuse)
		f.rd.used = time.Time{} // the last scan's hold on the window has lapsed
		clear(got)
		require.NoError(t, scan(f, got, 0), "refuse %d", refuse)
		require.True(t, bytes.Equal(want, got), "the file's bytes, refuse %d", refuse)
		_, batches := q.Counts()
		assert.NotEmpty(t, batches)
		assert.False(t, f.rd.win.InFlight(), "a refused read counted in flight")
		assert.False(t, f.rd.busy)
		small, large := f.rd.c.Small(), f.rd.c.Large()
		assert.Equal(t, small.Made()+large.Made()-1, small.Idle()+large.Idle(), "read buffers held")
	}

	q.Refuse(-1)
	f.rd.used = time.Time{}
	clear(got)
	require.NoError(t, scan(f, got, 0))
	require.True(t, bytes.Equal(want, got), "the file's bytes after the refusals")
	_, batches := q.Counts()
	assert.Equal(t, []int{2}, batches, "the window serves the scan again")
	require.NoError(t, f.Close())
	testenv.WaitGoroutines(t, goroutines)
}
