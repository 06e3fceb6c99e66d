package aligned

import (
	"errors"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewAlignsAddressAndSize(t *testing.T) {
	for _, align := range []int{512, 4096, 64 << 10, 1 << 20} {
		b, err := New(2*align, align)
		require.NoError(t, err, "align %d", align)
		p := b.Bytes()
		assert.Len(t, p, 2*align)
		assert.Equal(t, 2*align, cap(p))
		assert.True(t, IsSliceAligned(p, align), "address %p not aligned to %d", &p[0], align)
		for i := range p {
			if p[i] != 0 {
				t.Fatalf("byte %d not zero", i)
			}
		}
		p[0], p[len(p)-1] = 1, 2 // the whole capacity is writable
		assert.Equal(t, 2*align, b.Size())
		assert.Equal(t, align, b.Align())
		b.Free()
		b.Free() // idempotent
		assert.Nil(t, b.Bytes())
	}
}

func TestNewRejectsBadArguments(t *testing.T) {
	cases := []struct {
		size, align int
		want        error
	}{
		{4096, 0, ErrBadAlign},
		{4096, -512, ErrBadAlign},
		{4096, 3000, ErrBadAlign},
		{0, 512, ErrBadSize},
		{-4096, 512, ErrBadSize},
		{1000, 512, ErrBadSize},
	}
	for _, c := range cases {
		b, err := New(c.size, c.align)
		assert.Nil(t, b)
		assert.True(t, errors.Is(err, c.want), "New(%d, %d) = %v, want %v", c.size, c.align, err, c.want)
	}
}

func TestCleanupReleasesDroppedBuffer(t *testing.T) {
	released := make(chan struct{})
	func() {
		b, err := New(4096, 4096)
		require.NoError(t, err)
		runtime.AddCleanup(b, func(ch chan struct{}) { close(ch) }, released)
	}()
	for range 20 {
		runtime.GC()
		select {
		case <-released:
			return
		default:
		}
		runtime.Gosched()
	}
	t.Fatal("a dropped Buffer was never collected")
}

func TestRounding(t *testing.T) {
	assert.Equal(t, 0, Up(0, 512))
	assert.Equal(t, 512, Up(1, 512))
	assert.Equal(t, 512, Up(512, 512))
	assert.Equal(t, int64(8192), Up(int64(4097), 4096))
	assert.Equal(t, 4096, Down(8191, 4096))
	assert.Equal(t, 0, Down(511, 512))
	assert.True(t, IsAligned(int64(1<<20), 4096))
	assert.False(t, IsAligned(4100, 4096))
	for _, n := range []int{1, 2, 512, 4096, 1 << 30} {
		assert.True(t, IsPowerOfTwo(n), n)
	}
	for _, n := range []int{0, -4096, 3, 1000, 4097, 6144} {
		assert.False(t, IsPowerOfTwo(n), n)
	}

	b, err := New(8192, 4096)
	require.NoError(t, err)
	defer b.Free()
	p := b.Bytes()
	for i := range p {
		p[i] = 0xff
	}
	assert.Equal(t, 4096, PadZero(p, 100, 4096))
	assert.Equal(t, byte(0xff), p[99])
	assert.Equal(t, byte(0), p[100])
	assert.Equal(t, byte(0), p[4095])
	assert.Equal(t, byte(0xff), p[4096])
	assert.Equal(t, 4096, PadZero(p, 4096, 4096), "an aligned length needs no padding")
	assert.False(t, IsSliceAligned(p[1:], 512))
	assert.True(t, IsSliceAligned(p[512:], 512))
	assert.True(t, IsSliceAligned(nil, 4096))
}
