//go:build !unix

package aligned

// region is an over-allocated Go slice; the garbage collector never moves
// heap objects, so an aligned window inside it stays aligned.
type region struct {
	mem []byte
}

func allocate(size, align int, _ bool) (*region, error) {
	m := make([]byte, size+align)
	start := Up(addr(m), uintptr(align)) - addr(m)
	return &region{mem: m[start : int(start)+size : int(start)+size]}, nil
}

func (r *region) release() {}
