package blobio

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/internal/filetest"
	"github.com/dio-storage/dio/internal/testenv"
)

// scanFile writes blobs of 1,000 bytes filling about windows Scanner
// reads of 64 KiB (one blob for none) and returns the path and the blobs.
func scanFile(t *testing.T, windows int) (string, [][]byte) {
	t.Helper()
	path := filepath.Join(testenv.Dir(t), "scan.blob")
	w, err := Create(path, nil)
	require.NoError(t, err)
	var blobs [][]byte
	for i := 0; i < max(1, windows*(64<<10)/1004); i++ {
		p := make([]byte, 1000)
		for j := range p {
			p[j] = byte(i + j)
		}
		_, err := w.WriteBlob(p)
		require.NoError(t, err)
		blobs = append(blobs, p)
	}
	require.NoError(t, w.Close())
	return path, blobs
}

// countedScanner returns a Scanner over r whose queue is wrapped in a
// filetest.CountQueue refusing a batch after refuse requests (none for
// refuse < 0), and the wrapper.
func countedScanner(t *testing.T, r *Reader, refuse int) (*Scanner, *filetest.CountQueue) {
	t.Helper()
	s := NewScanner(r)
	var q *filetest.CountQueue
	require.NoError(t, s.w.SetQueue(func(inner direct.Queue) direct.Queue {
		q = filetest.NewCountQueue(inner)
		return q
	}))
	q.Refuse(refuse)
	return s, q
}

// TestScannerBatch: a Scanner's first two windows go to the queue as one
// batch (one io_uring_enter on the io_uring engine), and every later
// window as one read ahead, and the blobs come back whole and in order.
func TestScannerBatch(t *testing.T) {
	path, blobs := scanFile(t, 5)
	r, err := Open(path, &Options{BufferSize: 64 << 10})
	require.NoError(t, err)
	defer r.Close()
	s, q := countedScanner(t, r, -1)
	i := 0
	for s.Scan() {
		require.Less(t, i, len(blobs))
		require.Equal(t, blobs[i], s.Bytes(), "blob %d", i)
		i++
	}
	require.NoError(t, s.Err())
	assert.Equal(t, len(blobs), i)
	submits, batches := q.Counts()
	assert.Equal(t, []int{2}, batches, "the first two windows, one batch")
	windows := int((r.Size() + 64<<10 - 1) / (64 << 10))
	assert.Equal(t, windows-2, submits, "every later window read ahead alone")

	// A file of one window has nothing to read ahead: one read.
	path, blobs = scanFile(t, 0)
	r1, err := Open(path, &Options{BufferSize: 64 << 10})
	require.NoError(t, err)
	defer r1.Close()
	s, q = countedScanner(t, r1, -1)
	require.True(t, s.Scan())
	assert.Equal(t, blobs[0], s.Bytes())
	require.False(t, s.Scan())
	require.NoError(t, s.Err())
	submits, batches = q.Counts()
	assert.Empty(t, batches, "no batch for one window")
	assert.Equal(t, 1, submits)
}

// TestScannerBatchRefused: when the queue takes the first window's read
// and refuses the second's, the scan fails with the refusal, waits for the
// read it started, and frees its buffers and queue; the Reader closes
// without waiting and leaves no goroutine behind.
func TestScannerBatchRefused(t *testing.T) {
	path, _ := scanFile(t, 3)
	r, err := Open(path, &Options{BufferSize: 64 << 10})
	require.NoError(t, err)
	scanAll := func() {
		s, _ := countedScanner(t, r, -1)
		n := 0
		for s.Scan() {
			n++
		}
		require.NoError(t, s.Err())
		assert.Positive(t, n)
	}
	scanAll() // the process's shared rings and their goroutines exist now
	before := runtime.NumGoroutine()
	for _, refuse := range []int{1, 0} {
		s, q := countedScanner(t, r, refuse)
		require.False(t, s.Scan())
		require.ErrorIs(t, s.Err(), filetest.ErrRefused, "refuse %d", refuse)
		_, batches := q.Counts()
		assert.Equal(t, []int{2}, batches)
		assert.False(t, s.w.InFlight(), "a read left in flight")
		assert.False(t, s.w.Allocated(), "buffers not freed")
		require.NoError(t, s.Close())
	}
	scanAll() // the same Reader scans on
	require.NoError(t, r.Close())
	testenv.WaitGoroutines(t, before)
}

// TestScannerShortFirstWindow: when the file is cut below the Reader's
// size after Open, the first window comes back short and the second read
// of begin's batch lies past where the stream goes on: the scan drops it,
// reads on where the first ended, and fails with io.ErrUnexpectedEOF
// after the blobs that are there, instead of handing out the wrong bytes.
func TestScannerShortFirstWindow(t *testing.T) {
	path, blobs := scanFile(t, 4)
	r, err := Open(path, &Options{BufferSize: 64 << 10})
	require.NoError(t, err)
	defer r.Close()
	cut := int64(32 << 10)
	require.NoError(t, os.Truncate(path, cut))
	s, q := countedScanner(t, r, -1)
	i := 0
	for s.Scan() {
		require.Equal(t, blobs[i], s.Bytes(), "blob %d", i)
		i++
	}
	require.ErrorIs(t, s.Err(), io.ErrUnexpectedEOF)
	assert.Equal(t, int(cut/1004), i, "the blobs wholly before the cut")
	_, batches := q.Counts()
	assert.Equal(t, []int{2}, batches)
	assert.False(t, s.w.InFlight(), "a read left in flight")
}
