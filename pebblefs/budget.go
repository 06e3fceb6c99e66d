package pebblefs

import "sync"

// Read-ahead sizes a sequential file can get from the budget.
const (
	// minReadAhead is the least read-ahead a sequential file gets, even
	// when the budget is spent: block by block (4 KiB O_DIRECT reads) a
	// compaction ran at a fifth of its speed (issue 31: a 2 GB load at
	// 5,000 against 24,600 inserts/s), and its 128 KiB of memory is
	// bounded by the compactions' inputs, not by the files open. The
	// kernel's own read-ahead window is 128 KiB (read_ahead_kb).
	minReadAhead = 64 << 10

	// seqReadAhead is a sequential file's read-ahead while the budget
	// holds it, unless Options.ReadAhead says otherwise: twice the
	// kernel's FADV_SEQUENTIAL window, so that an L0 compaction reading
	// twenty inputs at once fits the default budget.
	seqReadAhead = 512 << 10
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
// function that gives it back. When none fits it still grants
// minReadAhead, counted, past the limit: a compaction must not read
// block by block, and what it takes beyond the budget is bounded by the
// compactions' inputs open at once.
func (b *aheadBudget) take(want int) (int, func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	want = max(want, minReadAhead)
	for ra := want; ra >= minReadAhead; ra /= 2 {
		if put := b.reserveLocked(aheadCost(ra)); put != nil {
			return ra, put
		}
	}
	b.used += aheadCost(minReadAhead)
	return minReadAhead, b.giveBack(aheadCost(minReadAhead))
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
