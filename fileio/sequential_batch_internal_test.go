package fileio

import (
	"bytes"
	"io"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/internal/filetest"
	"github.com/dio-storage/dio/internal/testenv"
)

// patterned writes n bytes of a pattern no two 4 KiB blocks share to a
// new file and returns its path and bytes.
func patterned(t *testing.T, n int) (string, []byte) {
	t.Helper()
	path := filepath.Join(testenv.Dir(t), "seq")
	want := make([]byte, n)
	for i := range want {
		want[i] = byte(i*7 + i>>12)
	}
	w, err := Create(path, nil)
	require.NoError(t, err)
	_, err = w.Write(want)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return path, want
}

// countedSequential returns a Sequential over r at 0, its ring set up and
// its queue wrapped in a filetest.CountQueue refusing a batch after
// refuse requests (none for refuse < 0), and the wrapper.
func countedSequential(t *testing.T, r *Reader, refuse int) (*Sequential, *filetest.CountQueue) {
	t.Helper()
	s, err := r.NewSequential(0)
	require.NoError(t, err)
	s.mu.Lock()
	defer s.mu.Unlock()
	var q *filetest.CountQueue
	require.NoError(t, s.w.SetQueue(func(inner direct.Queue) direct.Queue {
		q = filetest.NewCountQueue(inner)
		return q
	}))
	q.Refuse(refuse)
	return s, q
}

// TestSequentialBatch: the windows a Sequential opens with (64 KiB
// doubling up to 512 KiB, 2 MiB ahead) go to the queue as one batch, and
// each window given back afterwards is refilled alone, as it is due.
func TestSequentialBatch(t *testing.T) {
	path, want := patterned(t, 6<<20+1000)
	r, err := Open(path, nil)
	require.NoError(t, err)
	defer r.Close()
	s, q := countedSequential(t, r, -1)
	defer s.Close()
	ring := s.w.Ring()
	var got bytes.Buffer
	_, err = io.Copy(&got, s)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got.Bytes()), "the file's bytes")
	submits, batches := q.Counts()
	require.Equal(t, []int{ring}, batches, "the opening windows, one batch")
	// 64+128+256 KiB, then 512 KiB windows up to the block past Size.
	opened := 64<<10 + 128<<10 + 256<<10
	rest := int64(len(want)) - int64(opened)
	assert.Equal(t, 3+int((rest+512<<10-1)/(512<<10)), ring+submits, "reads in all")

	// A jump back opens the window again: a batch again.
	_, err = s.Seek(0, io.SeekStart)
	require.NoError(t, err)
	p := make([]byte, 10)
	_, err = s.ReadAt(p, 5<<20) // in the window: no read
	require.NoError(t, err)
	_, err = io.ReadFull(s, p)
	require.NoError(t, err)
	assert.Equal(t, want[:10], p)
	_, batches = q.Counts()
	assert.Equal(t, []int{ring}, batches)
}

// TestSequentialBatchRefused: when the queue takes only the first two
// reads of the opening batch, the caller gets the bytes they hold and
// then the refusal; nothing is left in flight, the next call starts the
// window again where the caller stopped, and Close leaves no goroutine
// behind.
func TestSequentialBatchRefused(t *testing.T) {
	path, want := patterned(t, 3<<20)
	r, err := Open(path, nil)
	require.NoError(t, err)
	defer r.Close()
	warm, _ := countedSequential(t, r, -1) // the process's rings exist now
	_, err = io.Copy(io.Discard, warm)
	require.NoError(t, err)
	require.NoError(t, warm.Close())
	before := runtime.NumGoroutine()

	s, q := countedSequential(t, r, 2)
	got := make([]byte, len(want))
	n, err := io.ReadFull(s, got)
	require.ErrorIs(t, err, filetest.ErrRefused)
	assert.Equal(t, 64<<10+128<<10, n, "the bytes of the reads accepted")
	assert.Equal(t, want[:n], got[:n])
	assert.False(t, s.w.InFlight(), "a read in flight")
	_, batches := q.Counts()
	assert.Equal(t, []int{s.w.Ring()}, batches)

	q.Refuse(-1)
	k, err := io.ReadFull(s, got[n:])
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want, got[:n+k]), "the rest, read on after the refusal")
	require.NoError(t, s.Close())

	testenv.WaitGoroutines(t, before)
}
