package blobio

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/internal/filetest"
	"github.com/dio-storage/dio/internal/testenv"
)

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
	if !r.c.URing() {
		t.Skipf("ReadBlobs batches on io_uring only; here %v", r.Mode())
	}
	q := filetest.NewCountQueue(r.c.Queue())
	require.NotNil(t, q.Queue)
	r.c.SetQueue(q)

	calls := 0
	require.NoError(t, r.ReadBlobs(offs, func(int, []byte) error { calls++; return nil }))
	assert.Equal(t, len(offs), calls)
	_, batches := q.Counts()
	assert.Equal(t, []int{len(offs)}, batches, "batches submitted")

	q.Refuse(10)
	err = r.ReadBlobs(offs, func(int, []byte) error { return nil })
	require.ErrorIs(t, err, filetest.ErrRefused)
	var be *BlobError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, 10, be.Index, "the first read refused")
	assert.Equal(t, offs[10], be.Offset)
	assert.Zero(t, r.c.Busy(), "reads counted in progress")
	assert.Equal(t, r.c.Small().Made(), r.c.Small().Idle(), "small buffers not given back")

	q.Refuse(-1)
	calls = 0
	require.NoError(t, r.ReadBlobs(offs, func(int, []byte) error { calls++; return nil }))
	assert.Equal(t, len(offs), calls)
}
