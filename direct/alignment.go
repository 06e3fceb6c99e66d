package direct

import (
	"fmt"
	"unsafe"
)

// MinAlignment, 512 bytes, is the sector: the smallest logical block size a
// Linux block device can have (the kernel's SECTOR_SIZE; its block layer
// refuses a smaller one), so no O_DIRECT file asks for offsets and lengths
// on a finer grid. dio aligns buffers' sizes and addresses to at
// least this much even where a file reports less (a page-cache file
// reports 1; NVMe's memory alignment can be 4), so a buffer fits any
// direct file it may meet.
const MinAlignment = 512

// DefaultAlignment is used when neither the filesystem nor a block device
// says anything: 4096 covers MinAlignment and 4 KiB-sector devices alike.
const DefaultAlignment = 4096

// Alignment is what direct I/O on one file demands: buffer addresses must be
// multiples of Memory, file offsets and lengths multiples of Offset.
type Alignment struct {
	Memory, Offset int
}

// String returns "memory/offset", for example "512/4096".
func (a Alignment) String() string { return fmt.Sprintf("%d/%d", a.Memory, a.Offset) }

// Block returns the larger of the two alignments: a buffer size or a padding
// unit that satisfies both.
func (a Alignment) Block() int { return max(a.Memory, a.Offset) }

// Source says where an Alignment came from.
type Source string

// The sources of an Alignment, in the order discovery tries them.
const (
	SourceStatx       Source = "statx"        // STATX_DIOALIGN (Linux ≥ 6.1)
	SourceBlockDevice Source = "block-device" // the logical block size in sysfs
	SourceDefault     Source = "default"      // DefaultAlignment
	SourceNone        Source = "none"         // no rules: a page-cache file
)

// pageCache is the Alignment of a file without O_DIRECT: anything goes.
var pageCache = Alignment{Memory: 1, Offset: 1}

// check returns an *UnalignedError when p or off breaks a, and nil
// otherwise.
func (a Alignment) check(op, path string, p []byte, off int64) error {
	var addr uintptr
	if cap(p) > 0 {
		addr = uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	}
	if addr%uintptr(a.Memory) != 0 || off%int64(a.Offset) != 0 || len(p)%a.Offset != 0 {
		return &UnalignedError{Op: op, Path: path, Addr: addr, Off: off, Len: len(p), Align: a}
	}
	return nil
}
