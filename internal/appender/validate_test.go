package appender

import (
	"errors"
	"io"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/fallback"
)

// TestValidate: negative sizes and counts, a ring too large for memory
// and a pool that does not fit the file are ErrInvalid, in words that name
// no package, and WrapInvalid moves them under the caller's sentinel.
func TestValidate(t *testing.T) {
	huge, err := aligned.NewPool(2*MaxBufferSize, 4096, 2*MaxBufferSize) // maps nothing until Get
	require.NoError(t, err)
	defer huge.Close()
	for _, o := range []Options{
		{BufferSize: -4096},
		{Buffers: -1},
		{MaxWrite: -1},
		{Buffers: 1 << 40, BufferSize: 1 << 40},
		{Buffers: 1 << 20},
		{Buffers: 1 << 15, BufferSize: math.MaxInt / 1024},
		{BufferSize: MaxBufferSize + 1},
		{BufferSize: 5 << 30, Buffers: 2}, // an SQE's length is 32 bits
		{Pool: huge},
	} {
		err := o.Validate()
		require.ErrorIs(t, err, ErrInvalid, "%+v", o)
		assert.NotContains(t, err.Error(), "appender")
	}
	require.NoError(t, Options{}.Validate())
	require.NoError(t, Options{BufferSize: 100, Buffers: 3, MaxWrite: 1}.Validate(), "sizes are rounded, not refused")
	require.NoError(t, Options{BufferSize: MaxBufferSize}.Validate())

	f, _ := open(t, fallback.Auto)
	defer f.Close()
	if f.Mode().Direct { // every pool fits the page cache
		misfit, err := aligned.NewPool(1000, 8, 4000)
		require.NoError(t, err)
		defer misfit.Close()
		_, err = New(f, Options{Pool: misfit})
		require.ErrorIs(t, err, ErrInvalid)
		assert.NotContains(t, err.Error(), "appender")
	}
	_, err = New(f, Options{Buffers: -1})
	require.ErrorIs(t, err, ErrInvalid)

	mine := errors.New("pkg: invalid options")
	wrapped := WrapInvalid(err, mine)
	assert.ErrorIs(t, wrapped, mine)
	assert.False(t, errors.Is(wrapped, ErrInvalid), "the caller's sentinel replaces ErrInvalid")
	assert.Equal(t, "pkg: invalid options: Buffers is -1", wrapped.Error())
	assert.Equal(t, io.EOF, WrapInvalid(io.EOF, mine), "other errors pass through")
	assert.NoError(t, WrapInvalid(nil, mine))
}
