package pebblefs

import "sync"

// Read-ahead sizes a sequential file can get from the budget.
const (
	// minReadAhead is the least read-ahead worth a Sequential: below it
	// a file is read as Pebble asks, block by block.
	minReadAhead = 128 << 10
	// maxSeqRead is fileio's largest read-ahead read (its maxSeqRead):
	// a Sequential maps ReadAhead plus one of these, or twice a smaller
	// ReadAhead.
	maxSeqRead = 512 << 10
)

// aheadBudget is the read-ahead half of Options.Memory: the windows of
// every file Pebble reads in order (a compaction's inputs, one per L0
// sublevel and level) come out of it, so that twenty inputs open at once
// do not map twenty times 2.5 MiB.
type aheadBudget struct {
	mu          sync.Mutex
	limit, used int64
}

// aheadCost is the memory a Sequential with read-ahead ra maps.
func aheadCost(ra int) int64 { return int64(ra + min(ra, maxSeqRead)) }

// take reserves the largest read-ahead from want down to minReadAhead,
// halving, that the budget still holds, and returns it with the
// function that gives it back; 0 when none fits.
func (b *aheadBudget) take(want int) (int, func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ra := want; ra >= minReadAhead; ra /= 2 {
		if put := b.reserveLocked(aheadCost(ra)); put != nil {
			return ra, put
		}
	}
	return 0, nil
}

// reserve reserves n bytes (a Prefetch's) and returns the function that
// gives them back, or nil when the budget does not hold them.
func (b *aheadBudget) reserve(n int64) func() {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reserveLocked(n)
}

func (b *aheadBudget) reserveLocked(n int64) func() {
	if b.used+n > b.limit {
		return nil
	}
	b.used += n
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			b.used -= n
			b.mu.Unlock()
		})
	}
}
