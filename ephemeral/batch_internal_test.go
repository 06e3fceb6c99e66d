package ephemeral

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/filetest"
	"github.com/dio-storage/dio/internal/testenv"
)

// scanned returns a direct file holding n patterned bytes, all on disk,
// whose readers' queue is wrapped in a filetest.CountQueue.
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
	q, err := f.readQueue()
	require.NoError(t, err)
	cq := filetest.NewCountQueue(q)
	f.rd.q = cq
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

// TestWindowBatch: the sequential window's first whole read goes to the
// queue in one batch with the read-ahead after it; every later
// read-ahead goes alone, as the window moves on.
func TestWindowBatch(t *testing.T) {
	f, want, q := scanned(t, 4<<20)
	defer f.Close()
	got := make([]byte, len(want))
	require.NoError(t, scan(f, got, 0))
	require.True(t, bytes.Equal(want, got), "the file's bytes")
	submits, batches := q.Counts()
	assert.Equal(t, []int{2}, batches, "the window's read and the read-ahead, one batch")
	// 8 KiB (a random read), 64, 128 and 256 KiB reads, then the read-
	// ahead of every 512 KiB after the batch's two, up to the bytes the
	// writer's buffers still hold.
	_, inMemory := f.ap.Cached(0)
	whole := (int(inMemory) - (8<<10 + 64<<10 + 128<<10 + 256<<10) + 512<<10 - 1) / (512 << 10)
	require.Greater(t, whole, 2)
	assert.Equal(t, 4+whole-2, submits, "reads one at a time")
}

// TestWindowBatchRefused: when the queue refuses the read-ahead, the
// window's read still serves the reader, and the scan goes on correctly;
// when it refuses the window's read too, the reader gets the refusal and
// nothing stays in flight. Close leaves no goroutine behind.
func TestWindowBatchRefused(t *testing.T) {
	goroutines := runtime.NumGoroutine()
	f, want, q := scanned(t, 3<<20)
	got := make([]byte, len(want))
	q.Refuse(1)
	require.NoError(t, scan(f, got, 0))
	require.True(t, bytes.Equal(want, got), "the file's bytes, read ahead or not")
	_, batches := q.Counts()
	q.Refuse(0)
	assert.NotEmpty(t, batches)
	assert.False(t, f.rd.st.ahead, "a read-ahead the queue refused counted in flight")

	// Back to the start, once the scan's hold on the window has lapsed:
	// the window's growth begins again, and its whole read is refused.
	f.rd.st.used = time.Time{}
	clear(got)
	err := scan(f, got, 0)
	require.ErrorIs(t, err, filetest.ErrRefused)
	assert.False(t, f.rd.st.ahead)
	assert.False(t, f.rd.st.busy)
	assert.Zero(t, len(f.rd.tokens), "read buffers held")

	q.Refuse(-1)
	clear(got)
	require.NoError(t, scan(f, got, 0))
	require.True(t, bytes.Equal(want, got), "the file's bytes after the refusal")
	require.NoError(t, f.Close())
	testenv.WaitGoroutines(t, goroutines)
}
