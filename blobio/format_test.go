package blobio

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHeaderBytes(t *testing.T) {
	cases := []struct {
		n    int
		c    Compression
		want []byte
	}{
		{0, None, []byte{0x80, 0, 0, 0}}, // never 0x00: see shortHeader
		{1, None, []byte{0x01}},
		{127, None, []byte{0x7f}},
		{128, None, []byte{0x80, 0, 0, 0x80}},
		{8192, None, []byte{0x80, 0, 0x20, 0}},
		{MaxBlobSize, None, []byte{0x8f, 0xff, 0xff, 0xff}},
		{10, Zstd, []byte{0x90, 0, 0, 10}},
		{0x01020304, Zstd, []byte{0x91, 0x02, 0x03, 0x04}},
	}
	for _, c := range cases {
		got, err := AppendHeader(nil, c.n, c.c)
		require.NoError(t, err)
		assert.Equal(t, c.want, got, "n=%d %v", c.n, c.c)
		assert.Equal(t, len(c.want), HeaderSize(c.n, c.c))
		size, n, comp, err := DecodeHeader(append(got, 0xaa))
		require.NoError(t, err)
		assert.Equal(t, []int{len(c.want), c.n}, []int{size, n})
		assert.Equal(t, c.c, comp)
	}
}

func TestHeaderErrors(t *testing.T) {
	_, err := AppendHeader(nil, MaxBlobSize+1, None)
	assert.ErrorIs(t, err, ErrBlobTooLarge)
	_, err = AppendHeader(nil, -1, None)
	assert.ErrorIs(t, err, ErrBlobTooLarge)
	for _, c := range []Compression{-1, 2, 9} { // labelled uncompressed before
		hdr, err := AppendHeader(nil, 5, c)
		assert.ErrorIs(t, err, ErrInvalidOptions, "compression %v", c)
		assert.Empty(t, hdr)
	}

	for _, first := range []byte{0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0} {
		_, _, _, err := DecodeHeader([]byte{first, 0, 0, 1})
		assert.ErrorIs(t, err, ErrCorrupt, "first byte %#x", first)
	}
	for _, p := range [][]byte{nil, {0x80}, {0x80, 0}, {0x90, 0, 0}} {
		_, _, _, err := DecodeHeader(p)
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "%x", p)
	}
}

// TestHeaderRoundTrip is the property: every length and compression the
// writer can produce decodes to itself, and the header is as short as the
// format allows.
func TestHeaderRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		n := r.IntN(MaxBlobSize + 1)
		if r.IntN(2) == 0 {
			n = r.IntN(300)
		}
		c := Compression(r.IntN(2))
		h, err := AppendHeader(nil, n, c)
		require.NoError(t, err)
		size, got, comp, err := DecodeHeader(h)
		require.NoError(t, err)
		require.Equal(t, len(h), size)
		require.Equal(t, n, got)
		require.Equal(t, c, comp)
		require.Equal(t, n > 0 && n < 128 && c == None, size == 1)
	}
}

func FuzzDecodeHeader(f *testing.F) {
	for _, seed := range [][]byte{{0}, {0x7f}, {0x80, 0, 0, 0x80}, {0x90, 0, 1, 0}, {0xff, 0xff, 0xff, 0xff}, {0x80}, {}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		size, n, c, err := DecodeHeader(p)
		if err != nil {
			return
		}
		if size > len(p) || n < 0 || n > MaxBlobSize {
			t.Fatalf("DecodeHeader(%x) = %d, %d, %v", p, size, n, c)
		}
		// What decodes re-encodes to the same bytes, unless a 4-byte
		// header carried a length a 1-byte one could have (the writer never
		// makes those, the reader accepts them as Neon's does).
		h, err := AppendHeader(nil, n, c)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) == size && !bytes.Equal(h, p[:size]) {
			t.Fatalf("header %x re-encodes as %x", p[:size], h)
		}
	})
}
