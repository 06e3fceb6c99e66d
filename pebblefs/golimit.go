//go:build unix

package pebblefs

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// minGoMemoryLimit is the least GoMemoryLimit returns: below it the
// collector would run all the time for a Pebble whose caches were sized
// past the memory there is (the runtime caps its CPU at half, and the
// process still fits no better).
const minGoMemoryLimit = 32 << 20

// GoMemoryLimit returns a soft memory limit for the Go runtime
// (debug.SetMemoryLimit, or GOMEMLIMIT) under which Pebble opened with o
// on fsys fits in the memory this process may use (its memory cgroup's
// limit, else the machine's): that memory less what is held outside the
// Go heap, which the runtime does not see: Pebble's block cache
// (o.Cache's size, else o.CacheSize, else 8 MB) and memtables (MemTableSize times
// MemTableStopWritesThreshold, C memory) and, when fsys is pebblefs's,
// its budgets (Options.Memory and FreshFiles); less a sixteenth of the
// limit for C malloc's own slack. At least 32 MiB.
//
// Without a limit Go collects when the heap has doubled since the last
// collection (GOGC=100): a Pebble whose live heap is 60 MiB (iterators,
// compactions' writers, the file cache's tables) may hold 120 MiB, and
// with a block cache of half a container, sized for the page cache it no
// longer needs, that is past the container's limit: the process is
// OOM-killed. pebblefs does not set the limit itself, since it is the
// whole process's; a program that runs Pebble on pebblefs in a
// container should:
//
//	debug.SetMemoryLimit(pebblefs.GoMemoryLimit(fsys, opts))
//
// after filling opts (Cache or CacheSize, MemTableSize) and before
// pebble.Open.
func GoMemoryLimit(fsys vfs.FS, o *pebble.Options) int64 {
	limit := memoryLimit()
	outside := int64(8 << 20) // Pebble's own cache when o.Cache is nil
	memtable, stop := int64(4<<20), int64(2)
	if o != nil {
		switch {
		case o.Cache != nil:
			outside = o.Cache.MaxSize()
		case o.CacheSize > 0:
			outside = o.CacheSize // what pebble.Open makes when Cache is nil
		}
		if o.MemTableSize > 0 {
			memtable = int64(o.MemTableSize)
		}
		if o.MemTableStopWritesThreshold > 0 {
			stop = int64(o.MemTableStopWritesThreshold)
		}
	}
	outside += memtable * stop
	if pfs := find(fsys); pfs != nil {
		outside += pfs.ahead.limit + pfs.poolBytes()
		if pfs.fresh != nil {
			outside += pfs.fresh.budget
		}
	}
	return max(limit-outside-limit/16, minGoMemoryLimit)
}

// find returns the FS New made that fsys is or wraps, or nil.
func find(fsys vfs.FS) *FS {
	for range 100 { // a wrapper's Unwrap could lead back to itself
		switch f := fsys.(type) {
		case nil:
			return nil
		case *FS:
			return f
		}
		fsys = fsys.Unwrap()
	}
	return nil
}

// poolBytes is the most the buffer pool holds.
func (fs *FS) poolBytes() int64 {
	if fs.pool == nil {
		return 0
	}
	s := fs.pool.Stats()
	return int64(s.Capacity) * int64(s.BufferSize)
}
