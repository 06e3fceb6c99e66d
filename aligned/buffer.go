package aligned

import (
	"errors"
	"fmt"
	"runtime"
)

// DefaultBufferSize, 64 KiB, is the size of the I/O buffers dio uses unless
// told otherwise (blobio's and ephemeral's Options.BufferSize). It is a
// buffer size, a whole number of any device's blocks, not a device's block
// size: that is direct.Alignment's Block. Neon's pageserver measured
// io_uring at 67% of std-fs with 8 KiB buffers and 87% with 64 KiB ones on
// the same ingest.
const DefaultBufferSize = 64 << 10

// DefaultBlockSize is DefaultBufferSize's old name.
//
// Deprecated: it is a buffer size, not a block size; use DefaultBufferSize.
const DefaultBlockSize = DefaultBufferSize

// Errors returned by New and NewPool.
var (
	ErrBadAlign = errors.New("aligned: alignment is not a positive power of two")
	ErrBadSize  = errors.New("aligned: size is not a positive multiple of the alignment")
)

// A Buffer is a fixed block of memory whose address and length are multiples
// of its alignment. A Buffer must stay reachable while the kernel uses its
// memory; Free releases it, or Pool.Put for a buffer from a Pool.
type Buffer struct {
	mem     []byte
	align   int
	region  *region // nil after Free
	cleanup runtime.Cleanup
	pool    *Pool // owner, nil when not pooled
	idle    bool  // sitting in its pool's free list
}

// New allocates a zeroed Buffer of size bytes aligned to align. size must be
// a positive multiple of align and align a power of two.
func New(size, align int) (*Buffer, error) { return newBuffer(size, align, true) }

// NewLazy is New without faulting the pages in: the kernel commits each
// page of memory when it is first touched, so a buffer costs only what is
// used of it. It is for a buffer the CPU fills before any I/O uses it (a
// writer's), which never takes the page fault inside the filesystem that
// New's prefault is for.
func NewLazy(size, align int) (*Buffer, error) { return newBuffer(size, align, false) }

func newBuffer(size, align int, populate bool) (*Buffer, error) {
	if err := check(size, align); err != nil {
		return nil, err
	}
	r, err := allocate(size, align, populate)
	if err != nil {
		return nil, fmt.Errorf("aligned: allocating %d bytes: %w", size, err)
	}
	b := &Buffer{mem: r.mem, align: align, region: r}
	b.cleanup = runtime.AddCleanup(b, func(r *region) { r.release() }, r)
	return b, nil
}

func check(size, align int) error {
	if !IsPowerOfTwo(align) {
		return fmt.Errorf("%w: %d", ErrBadAlign, align)
	}
	if size <= 0 || size%align != 0 {
		return fmt.Errorf("%w: size %d, alignment %d", ErrBadSize, size, align)
	}
	return nil
}

// Bytes returns the whole buffer; len and cap both equal its size. The slice
// is invalid after Free, or after Put for a buffer from a Pool.
func (b *Buffer) Bytes() []byte { return b.mem }

// Size returns the capacity of the buffer in bytes.
func (b *Buffer) Size() int { return len(b.mem) }

// Align returns the alignment the buffer was allocated with.
func (b *Buffer) Align() int { return b.align }

// Free releases the buffer's memory. Calling Free more than once is a no-op.
//
// A buffer that came from a Pool is not its user's to free: it goes back
// with Pool.Put, and Free panics, as unlocking an unlocked sync.Mutex
// does. Freeing it would keep its share of the pool's budget spent for
// good, or, once Put back, hand the next Get a buffer with no memory.
func (b *Buffer) Free() {
	if b.pool != nil {
		panic("aligned: Free of a buffer that belongs to a Pool; return it with Put")
	}
	b.free()
}

// free releases the memory, pooled or not.
func (b *Buffer) free() {
	if b.region == nil {
		return
	}
	b.cleanup.Stop()
	b.region.release()
	b.region = nil
	b.mem = nil
}
