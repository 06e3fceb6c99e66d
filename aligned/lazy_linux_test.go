package aligned_test

import (
	"os"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dio-storage/dio/aligned"
)

// resident counts p's pages in memory.
func resident(t *testing.T, p []byte) int {
	t.Helper()
	vec := make([]byte, (len(p)+os.Getpagesize()-1)/os.Getpagesize())
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), uintptr(unsafe.Pointer(&vec[0])))
	require.Zero(t, errno, "mincore: %v", errno)
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// TestNewLazy: New's pages are in memory from the start, NewLazy's only
// once touched.
func TestNewLazy(t *testing.T) {
	const size = 1 << 20
	pages := size / os.Getpagesize()
	b, err := aligned.New(size, 4096)
	require.NoError(t, err)
	defer b.Free()
	assert.Equal(t, pages, resident(t, b.Bytes()), "New prefaults")

	l, err := aligned.NewLazy(size, 4096)
	require.NoError(t, err)
	defer l.Free()
	assert.Zero(t, resident(t, l.Bytes()), "NewLazy commits nothing up front")
	l.Bytes()[0] = 1
	l.Bytes()[size-1] = 1
	assert.Equal(t, 2, resident(t, l.Bytes()))
	assert.Equal(t, size, l.Size())
	assert.True(t, aligned.IsSliceAligned(l.Bytes(), 4096))
}
