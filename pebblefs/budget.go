//go:build unix

package pebblefs

import (
	"slices"
	"sync"

	"github.com/dio-storage/dio/aligned"
)

// Read-ahead sizes a sequential file can get from the budget.
const (
	// minReadAhead is the least read-ahead a sequential file gets while
	// the budget holds it: block by block (4 KiB O_DIRECT reads) a
	// compaction ran at a fifth of its speed (issue 31: a 2 GB load at
	// 5,000 against 24,600 inserts/s). The kernel's own read-ahead
	// window is 128 KiB (read_ahead_kb).
	minReadAhead = 64 << 10

	// seqReadAhead is a sequential file's read-ahead while the budget
	// holds it, unless Options.ReadAhead says otherwise: twice the
	// kernel's FADV_SEQUENTIAL window.
	seqReadAhead = 512 << 10
	// maxSeqRead is fileio's largest read-ahead read (its maxSeqRead):
	// a Sequential maps ReadAhead plus one of these, or twice a smaller
	// ReadAhead.
	maxSeqRead = 512 << 10

	// floorShare is the share of the read-ahead budget kept for
	// minReadAhead grants: larger read-ahead is granted only while a
	// quarter of the budget stays free, so that the inputs a compaction
	// opens last (an L0 compaction opens one per sublevel, twenty and
	// more when L0 is deep) still read ahead: 2.7 MiB of the default
	// budget are 21 of them.
	floorShare = 4
)

// aheadBudget is the read-ahead part of Options.Memory: the windows of
// every file Pebble reads in order (a compaction's inputs, one per L0
// sublevel and level; an iterator's long scan) and its Prefetches come
// out of it, and nothing is granted past its limit: what pebblefs holds
// for read-ahead is the budget, however many compactions, scans and
// files there are. Prefetches take at most half of it, and a prefetch
// nobody read (its iterator stopped; Pebble keeps the file open in its
// file cache) is taken back, the oldest first, when a sequential file or
// a newer Prefetch finds the budget spent.
//
// A prefetch's memory is a buffer of aligned memory (outside Go's heap:
// no allocation, zeroing or collection per Prefetch) in one of three
// sizes, 64, 128 and 256 KiB (the sizes Pebble asks for) and two blocks,
// which fileio reads into with no copy (ReadAtBuffer). A buffer a
// prefetch is done with stays counted and waits on the shelf for the
// next Prefetch of its size, until a sequential file or a Prefetch of
// another size needs its bytes.
type aheadBudget struct {
	mu          sync.Mutex
	limit, used int64
	prefetched  int64                  // of used, Prefetches' buffers, shelved ones included
	shelf       []*aligned.Buffer      // prefetch buffers not in use, of used and prefetched
	shelved     int64                  // their bytes
	pres        map[*prefetcher]uint64 // files with a prefetch, by when it started
	tick        uint64
	denied      int64 // sequential opens that got no read-ahead: the budget was spent
}

// prefetchSize is the buffer a Prefetch of n bytes gets: n rounded up to
// 64, 128 or 256 KiB, and two blocks more, for the aligned span around
// it that fileio reads straight into the buffer.
func prefetchSize(n int64) int64 {
	size := int64(minReadAhead)
	for size < n && size < maxPrefetch {
		size *= 2
	}
	return size + 2*poolAlign
}

// aheadCost is the memory a Sequential with read-ahead ra maps.
func aheadCost(ra int) int64 { return int64(ra + min(ra, maxSeqRead)) }

// take reserves the largest read-ahead from want down to minReadAhead,
// halving, that the budget still holds (above minReadAhead only while a
// floorShare-th of it stays free), and returns it with the function that
// gives it back. When not even minReadAhead fits it takes prefetches
// back, oldest first, and when none is left it returns 0 and nil: the
// file is read without read-ahead, through the buffer pool, rather than
// past the budget.
func (b *aheadBudget) take(want int) (int, func()) {
	want = max(want, minReadAhead)
	for {
		b.mu.Lock()
		for len(b.shelf) > 0 && b.used+aheadCost(want) > b.limit-b.limit/floorShare {
			b.unshelveLocked()
		}
		for ra := want; ra >= minReadAhead; ra /= 2 {
			if ra > minReadAhead && b.used+aheadCost(ra) > b.limit-b.limit/floorShare {
				continue
			}
			if put := b.reserveLocked(aheadCost(ra)); put != nil {
				b.mu.Unlock()
				return ra, put
			}
		}
		victim := b.oldestLocked(nil)
		if victim == nil {
			b.denied++
			b.mu.Unlock()
			return 0, nil
		}
		b.mu.Unlock()
		victim.takeBack()
	}
}

// prefetchBuffer returns a buffer for pr's prefetch of n bytes, of
// prefetchSize(n), from the shelf or newly reserved, or nil when the
// budget does not hold one; then the oldest other prefetch, if any, is
// taken back for the next one. The buffer goes back with shelve.
func (b *aheadBudget) prefetchBuffer(pr *prefetcher, n int64) *aligned.Buffer {
	size := prefetchSize(n)
	b.mu.Lock()
	fits := func() bool { return b.prefetched+size <= b.limit/2 && b.used+size <= b.limit }
	buf := b.fromShelfLocked(size)
	if buf == nil {
		for len(b.shelf) > 0 && !fits() {
			b.unshelveLocked()
		}
		if !fits() {
			victim := b.oldestLocked(pr)
			b.mu.Unlock()
			if victim != nil {
				victim.tryTakeBack()
			}
			return nil
		}
		// New maps and faults in the buffer: rare, once the shelf holds
		// the sizes a workload's Prefetches ask for.
		var err error
		if buf, err = aligned.New(int(size), poolAlign); err != nil {
			b.mu.Unlock()
			return nil
		}
		b.used += size
		b.prefetched += size
	}
	if b.pres == nil {
		b.pres = map[*prefetcher]uint64{}
	}
	b.tick++
	b.pres[pr] = b.tick
	b.mu.Unlock()
	return buf
}

// shelve takes back a prefetch's buffer, for the next Prefetch of its
// size; it stays counted.
func (b *aheadBudget) shelve(buf *aligned.Buffer) {
	b.mu.Lock()
	b.shelf = append(b.shelf, buf)
	b.shelved += int64(buf.Size())
	b.mu.Unlock()
}

// fromShelfLocked returns a shelved buffer of size bytes, or nil.
// b.mu is held.
func (b *aheadBudget) fromShelfLocked(size int64) *aligned.Buffer {
	for i := len(b.shelf) - 1; i >= 0; i-- {
		if buf := b.shelf[i]; int64(buf.Size()) == size {
			b.shelf = slices.Delete(b.shelf, i, i+1)
			b.shelved -= size
			return buf
		}
	}
	return nil
}

// unshelveLocked frees the oldest shelved buffer, which the shelf
// holds. b.mu is held.
func (b *aheadBudget) unshelveLocked() {
	buf := b.shelf[0]
	b.shelf = slices.Delete(b.shelf, 0, 1)
	size := int64(buf.Size())
	b.shelved -= size
	b.prefetched -= size
	b.used -= size
	buf.Free()
}

// inUse is the read-ahead memory in use: held, less the shelf's.
func (b *aheadBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used - b.shelved
}

// oldestLocked returns the file with the oldest prefetch other than
// not, forgetting it, or nil. b.mu is held.
func (b *aheadBudget) oldestLocked(not *prefetcher) *prefetcher {
	var v *prefetcher
	for pr, t := range b.pres {
		if pr != not && (v == nil || t < b.pres[v]) {
			v = pr
		}
	}
	if v != nil {
		delete(b.pres, v)
	}
	return v
}

// forget drops pr from the prefetches that can be taken back: its
// prefetch was read, replaced or dropped.
func (b *aheadBudget) forget(pr *prefetcher) {
	b.mu.Lock()
	delete(b.pres, pr)
	b.mu.Unlock()
}

func (b *aheadBudget) reserveLocked(n int64) func() {
	if b.used+n > b.limit {
		return nil
	}
	b.used += n
	return b.giveBack(n)
}

// giveBack returns the function that gives n bytes back, once.
func (b *aheadBudget) giveBack(n int64) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			b.used -= n
			b.mu.Unlock()
		})
	}
}
