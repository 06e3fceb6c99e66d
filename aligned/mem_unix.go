//go:build unix

package aligned

import (
	"os"

	"golang.org/x/sys/unix"
)

// region is one anonymous mapping; mem is the aligned window inside it.
type region struct {
	mapping []byte
	mem     []byte
}

func allocate(size, align int, populate bool) (*region, error) {
	page := os.Getpagesize()
	extra := 0
	if align > page {
		extra = align - page // mmap is page aligned; over-map to find an aligned start
	}
	flags := unix.MAP_PRIVATE | unix.MAP_ANON
	if populate {
		flags |= mapPopulate
	}
	m, err := unix.Mmap(-1, 0, size+extra, unix.PROT_READ|unix.PROT_WRITE, flags)
	if err != nil {
		return nil, err
	}
	start := Up(addr(m), uintptr(align)) - addr(m)
	return &region{mapping: m, mem: m[start : int(start)+size : int(start)+size]}, nil
}

func (r *region) release() {
	_ = unix.Munmap(r.mapping) // only fails for a mapping we did not make
}
