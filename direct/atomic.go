package direct

import "sync/atomic"

// Untorn writes. A write that a power cut interrupts can leave any mix of
// old and new sectors in its range: a page or record rewritten in place
// can tear. Linux 6.11 added untorn writes (RWF_ATOMIC with O_DIRECT):
// after a crash the range holds all old or all new bytes. The filesystem
// says which writes it can make untorn through statx STATX_WRITE_ATOMIC:
// a length that is a power of two from Min to Max, at an offset that is a
// multiple of it. Measured here on Linux 6.18: xfs with reflink (the
// mkfs.xfs default) takes 4 KiB to 1 MiB, falling back to copy-on-write
// above what the device can write untorn; ext4 without bigalloc on a
// device without atomic writes, btrfs and tmpfs take none.
//
// Where a file has none, rewrite in place only what a torn write cannot
// hurt, and make the rest torn-proof the way databases do without it: a
// checksum in each page and a journal or double-write buffer holding the
// page before it is rewritten (InnoDB), or write new versions elsewhere
// and switch to them after a Sync (an append-only log: blobio).

// AtomicLimits is a file's unit of untorn writes, in bytes: a write of a
// power-of-two length from Min to Max at an offset that is a multiple of
// its length is never torn by a crash. Zero: the file has none.
type AtomicLimits struct{ Min, Max int }

// Supported reports whether the file takes untorn writes at all.
func (l AtomicLimits) Supported() bool { return l.Max > 0 }

// fits reports whether a write of n bytes at off keeps to the unit's
// rules: n a power of two within [Min, Max], off a multiple of n.
func (l AtomicLimits) fits(n int, off int64) bool {
	return n >= l.Min && n <= l.Max && n&(n-1) == 0 && off%int64(n) == 0
}

// atomicUnit holds a File's AtomicLimits once statx has reported them, so
// that WriteAtomicAt asks the kernel once per File, not once per write.
// The unit is the filesystem's and the device's (xfs's from its geometry
// and max_atomic_write, ext4's from bigalloc and the device's atomic
// write limits), fixed while the file is open. Only an answer is kept: a
// statx that failed (EIO on a filesystem that shut down) is asked again.
type atomicUnit struct{ lim atomic.Pointer[AtomicLimits] }
