package blobio_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/blobio"
)

// TestCorruptErrorOffsets: every read path reports a corrupt blob as a
// *CorruptError at the blob's offset in the file, where recovery can cut.
func TestCorruptErrorOffsets(t *testing.T) {
	// "ok", then a long header with bad compression bits at offset 3, then
	// a zstd blob at 7 whose payload is no zstd frame.
	data := []byte{2, 'o', 'k', 0xa0, 0, 0, 0, 0x90, 0, 0, 4, 1, 2, 3, 4}
	path := writeFile(t, data)
	r, err := blobio.Open(path, &blobio.Options{Size: int64(len(data))})
	require.NoError(t, err)
	defer r.Close()
	for _, off := range []int64{3, 7} {
		_, err := r.ReadBlob(off, nil)
		var ce *blobio.CorruptError
		require.ErrorAs(t, err, &ce, "ReadBlob(%d)", off)
		assert.Equal(t, off, ce.Off, "ReadBlob(%d): %v", off, err)
		assert.ErrorIs(t, err, blobio.ErrCorrupt)

		err = r.ReadBlobs([]int64{0, off}, func(int, []byte) error { return nil })
		require.ErrorAs(t, err, &ce, "ReadBlobs(%d)", off)
		assert.Equal(t, off, ce.Off, "ReadBlobs(%d): %v", off, err)
	}
	s := blobio.NewScanner(r)
	require.True(t, s.Scan())
	require.False(t, s.Scan())
	var ce *blobio.CorruptError
	require.ErrorAs(t, s.Err(), &ce)
	assert.Equal(t, int64(3), ce.Off, "Scanner: %v", s.Err())

	// fn's own error comes back as it is, offsets untouched.
	mine := &blobio.CorruptError{Off: 1, Reason: "mine"}
	err = r.ReadBlobs([]int64{0}, func(int, []byte) error { return mine })
	require.ErrorAs(t, err, &ce)
	assert.Same(t, mine, ce)
}
