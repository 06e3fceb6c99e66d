package blobio

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCorruptError: a bad header is a *CorruptError that matches
// ErrCorrupt, says where, and moves to the file's offsets through
// corruptAt, as the reader reports it; a short header is not corruption.
func TestCorruptError(t *testing.T) {
	_, _, _, err := DecodeHeader([]byte{0xa0, 0, 0, 1})
	var ce *CorruptError
	require.ErrorAs(t, err, &ce)
	assert.ErrorIs(t, err, ErrCorrupt)
	assert.Equal(t, int64(0), ce.Off)

	err = fmt.Errorf("reading: %w", corruptAt(4096, err))
	require.ErrorAs(t, err, &ce)
	assert.ErrorIs(t, err, ErrCorrupt)
	assert.Equal(t, int64(4096), ce.Off)
	assert.Contains(t, err.Error(), "offset 4096")
	assert.Contains(t, err.Error(), "compression bits 0xa0")

	_, _, _, err = DecodeHeader([]byte{0x80, 0})
	assert.Equal(t, io.ErrUnexpectedEOF, corruptAt(10, err), "a short read is not corruption")

	cause := errors.New("zstd: bad magic")
	err = &CorruptError{Off: 7, Reason: "compressed data", Err: cause}
	moved := ce.At(100)
	assert.Equal(t, &CorruptError{Off: 4196, Reason: ce.Reason, Err: ce.Err}, moved)
	assert.Equal(t, int64(4096), ce.Off, "At leaves its receiver alone")
	assert.ErrorIs(t, err, cause)
	assert.ErrorIs(t, err, ErrCorrupt)
	assert.Equal(t, "blobio: corrupt blob at offset 7: compressed data: zstd: bad magic", err.Error())
}
