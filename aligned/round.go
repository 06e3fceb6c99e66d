package aligned

import "unsafe"

// Integer is the set of types the rounding helpers accept.
type Integer interface {
	~int | ~int32 | ~int64 | ~uint | ~uint32 | ~uint64 | ~uintptr
}

// Up rounds n up to a multiple of align, a power of two.
func Up[T Integer](n, align T) T { return (n + align - 1) &^ (align - 1) }

// Down rounds n down to a multiple of align, a power of two.
func Down[T Integer](n, align T) T { return n &^ (align - 1) }

// IsAligned reports whether n is a multiple of align, a power of two.
func IsAligned[T Integer](n, align T) bool { return n&(align-1) == 0 }

// IsPowerOfTwo reports whether n is a positive power of two, as every
// alignment the rounding helpers take (and a kernel demands) is.
func IsPowerOfTwo[T Integer](n T) bool { return n > 0 && n&(n-1) == 0 }

// IsSliceAligned reports whether p starts at an address that is a multiple
// of align. An empty slice is aligned.
func IsSliceAligned(p []byte, align int) bool {
	return cap(p) == 0 || IsAligned(addr(p), uintptr(align))
}

// PadZero zeroes p[n:m], where m is n rounded up to align, and returns m.
// p must have room for m bytes.
func PadZero(p []byte, n, align int) int {
	m := Up(n, align)
	clear(p[n:m])
	return m
}

// addr returns the address of p's first byte, or 0 for an empty slice.
func addr(p []byte) uintptr {
	if cap(p) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(unsafe.SliceData(p)))
}
