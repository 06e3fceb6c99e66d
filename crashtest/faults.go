//go:build linux

package crashtest

// faults are the failures a disk is told to return: sectors that fail
// every read until they are written again (dm-dust's bad blocks), and
// writes and flushes that fail a given number of times.
type faults struct {
	bad []span // unreadable byte ranges of the disk, sector aligned

	writes     []span // fail writes that overlap these ...
	writeTimes int    // ... this many more times
	flushTimes int    // fail this many more flushes

	dead bool // fail every request (a state that hung)
}

// A span is a range of bytes on a disk.
type span struct{ off, n int64 }

func (s span) overlaps(off, n int64) bool { return off < s.off+s.n && s.off < off+n }

func (f *faults) readFails(off, n int64) bool {
	if f.dead {
		return true
	}
	for _, b := range f.bad {
		if b.overlaps(off, n) {
			return true
		}
	}
	return false
}

func (f *faults) writeFails(off, n int64) bool {
	if f.dead {
		return true
	}
	if f.writeTimes == 0 {
		return false
	}
	for _, w := range f.writes {
		if w.overlaps(off, n) {
			f.writeTimes--
			return true
		}
	}
	return false
}

func (f *faults) flushFails() bool {
	if f.dead {
		return true
	}
	if f.flushTimes == 0 {
		return false
	}
	f.flushTimes--
	return true
}

// rewritten heals the bad sectors a write of [off, off+n) covers whole, as
// a disk remaps a sector on write.
func (f *faults) rewritten(off, n, sector int64) {
	if len(f.bad) == 0 {
		return
	}
	// The sectors the write covers whole.
	lo := (off + sector - 1) / sector * sector
	hi := (off + n) / sector * sector
	if lo >= hi {
		return
	}
	var kept []span
	for _, b := range f.bad {
		if !b.overlaps(lo, hi-lo) {
			kept = append(kept, b)
			continue
		}
		if b.off < lo {
			kept = append(kept, span{b.off, lo - b.off})
		}
		if end := b.off + b.n; end > hi {
			kept = append(kept, span{hi, end - hi})
		}
	}
	f.bad = kept
}
