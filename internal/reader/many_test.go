package reader

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/internal/filetest"
	"github.com/dio-storage/dio/internal/testenv"
)

// Sentinels for the Readers the tests open.
var errClosed, errInvalid, errOffset = errors.New("closed"), errors.New("invalid"), errors.New("offset")

// testOptions are Options with the test's sentinels.
func testOptions() Options {
	return Options{Name: "reader", Closed: errClosed, Invalid: errInvalid, Offset: errOffset}
}

// patterned writes n bytes of a pattern no two 4 KiB blocks share to a
// new file and returns its path and bytes.
func patterned(t *testing.T, n int) (string, []byte) {
	t.Helper()
	path := filepath.Join(testenv.Dir(t), "patterned")
	want := make([]byte, n)
	for i := range want {
		want[i] = byte(i*7 + i>>12)
	}
	require.NoError(t, os.WriteFile(path, want, 0o600))
	return path, want
}

// countedReader opens path with its queue wrapped in a filetest.CountQueue; it
// skips where reads do not go through an io_uring queue (readMany's only
// path).
func countedReader(t *testing.T, path string) (*Reader, *filetest.CountQueue) {
	t.Helper()
	r, err := Open(path, testOptions())
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	if !r.uring {
		t.Skipf("long reads split on io_uring only; here %v", r.f.Mode())
	}
	q := filetest.NewCountQueue(r.Queue())
	require.NotNil(t, q.Queue)
	r.SetQueue(q)
	return r, q
}

// TestReadManyBatch: a ReadAt longer than a large buffer submits its
// first ManyDepth pieces as one batch and each later piece as one
// completes, and returns the file's bytes.
func TestReadManyBatch(t *testing.T) {
	path, want := patterned(t, 4<<20)
	r, q := countedReader(t, path)
	off, n := int64(1000), 3<<20
	got := make([]byte, n)
	k, err := r.ReadAt(got, off)
	require.NoError(t, err)
	require.Equal(t, n, k)
	require.True(t, bytes.Equal(want[off:off+int64(n)], got), "the file's bytes")
	submits, batches := q.Counts()
	span := int(r.large.Size()) / int(r.align) * int(r.align)
	lo := int(off) / int(r.align) * int(r.align)
	hi := (int(off) + n + int(r.align) - 1) / int(r.align) * int(r.align)
	pieces := (hi - lo + span - 1) / span
	require.Greater(t, pieces, ManyDepth)
	assert.Equal(t, []int{ManyDepth}, batches, "the first pieces, one batch")
	assert.Equal(t, pieces-ManyDepth, submits, "the rest one at a time")
	assert.Equal(t, r.large.Made(), r.large.Idle(), "large buffers given back")
}

// TestReadManyBatchRefused: when the queue takes only three pieces of
// the batch, ReadAt returns the bytes those hold and the refusal, after
// waiting for them, and every buffer is back in the pool; the next
// ReadAt reads it all.
func TestReadManyBatchRefused(t *testing.T) {
	path, want := patterned(t, 4<<20)
	r, q := countedReader(t, path)
	q.Refuse(3)
	got := make([]byte, 2<<20)
	k, err := r.ReadAt(got, 0)
	require.ErrorIs(t, err, filetest.ErrRefused)
	span := int(r.large.Size()) / int(r.align) * int(r.align)
	assert.Equal(t, 3*span, k, "the bytes of the pieces accepted")
	assert.Equal(t, want[:k], got[:k])
	assert.Equal(t, r.large.Made(), r.large.Idle(), "large buffers given back")
	assert.Zero(t, r.state.Load(), "calls in progress")

	q.Refuse(-1)
	k, err = r.ReadAt(got, 0)
	require.NoError(t, err)
	assert.Equal(t, len(got), k)
	assert.True(t, bytes.Equal(want[:len(got)], got))
}
