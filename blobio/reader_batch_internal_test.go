package blobio

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/internal/testenv"
)

// batchQueue wraps a Reader's queue as a direct.Batcher: it records the
// length of every batch and, with refuse >= 0, accepts only the first
// refuse requests of a batch and refuses the rest with errRefused.
type batchQueue struct {
	direct.Queue
	sizes  []int
	refuse int
}

var errRefused = errors.New("batch refused")

func (q *batchQueue) SubmitBatch(rs []direct.Request) (int, error) {
	q.sizes = append(q.sizes, len(rs))
	if q.refuse < 0 || q.refuse >= len(rs) {
		return direct.SubmitBatch(q.Queue, rs)
	}
	n, err := direct.SubmitBatch(q.Queue, rs[:q.refuse])
	if err == nil {
		err = errRefused
	}
	return n, err
}

// TestReadBlobsBatch: on io_uring, ReadBlobs hands its reads to the queue
// as one batch (one io_uring_enter), and when the queue accepts only part
// of a batch it fails naming the first read refused, waits for the reads
// accepted, and gives every buffer back.
func TestReadBlobsBatch(t *testing.T) {
	path := filepath.Join(testenv.Dir(t), "blobs")
	w, err := Create(path, nil)
	require.NoError(t, err)
	const blobs, every = 64 * 8, 8 // 28 KiB between the blobs read: no merging
	var offs []int64
	for i := range blobs {
		off, err := w.WriteBlob(make([]byte, 4092))
		require.NoError(t, err)
		if i%every == 0 {
			offs = append(offs, off)
		}
	}
	require.NoError(t, w.Close())
	r, err := Open(path, nil)
	require.NoError(t, err)
	defer r.Close()
	if !r.uring {
		t.Skipf("ReadBlobs batches on io_uring only; here %v", r.f.Mode())
	}
	q := &batchQueue{Queue: r.queue(), refuse: -1}
	require.NotNil(t, q.Queue)
	r.q.Store(&queueRef{q})

	calls := 0
	require.NoError(t, r.ReadBlobs(offs, func(int, []byte) error { calls++; return nil }))
	assert.Equal(t, len(offs), calls)
	assert.Equal(t, []int{len(offs)}, q.sizes, "batches submitted")

	q.sizes, q.refuse = nil, 10
	err = r.ReadBlobs(offs, func(int, []byte) error { return nil })
	require.ErrorIs(t, err, errRefused)
	var be *BlobError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, 10, be.Index, "the first read refused")
	assert.Equal(t, offs[10], be.Offset)
	assert.Zero(t, r.busy.Load(), "reads counted in progress")
	assert.Equal(t, r.small.Made(), r.small.Idle(), "small buffers not given back")

	q.refuse = -1
	calls = 0
	require.NoError(t, r.ReadBlobs(offs, func(int, []byte) error { calls++; return nil }))
	assert.Equal(t, len(offs), calls)
}
