//go:build unix

package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// stallClock sums the time Pebble held writes back (its write stalls:
// too many memtables waiting to flush, too many files in L0), the usual
// reason a write-heavy workload is slow: flushes and compactions falling
// behind the writers.
type stallClock struct {
	mu      sync.Mutex
	since   time.Time // when the stall in progress began; zero if none
	sum     time.Duration
	reasons map[string]int

	// What -metrics prints besides Pebble's own: flushes and compactions,
	// their count and the time they took.
	flushes, compactions int
	flushDur, compactDur time.Duration
	flushApply           time.Duration // TotalDuration minus Duration: applying the flush
}

func (c *stallClock) listener() *pebble.EventListener {
	return &pebble.EventListener{
		WriteStallBegin: func(i pebble.WriteStallBeginInfo) {
			c.mu.Lock()
			c.since = time.Now()
			if c.reasons == nil {
				c.reasons = map[string]int{}
			}
			c.reasons[i.Reason]++
			c.mu.Unlock()
		},
		FlushEnd: func(i pebble.FlushInfo) {
			c.mu.Lock()
			c.flushes++
			c.flushDur += i.Duration
			c.flushApply += i.TotalDuration - i.Duration
			c.mu.Unlock()
		},
		CompactionEnd: func(i pebble.CompactionInfo) {
			c.mu.Lock()
			c.compactions++
			c.compactDur += i.TotalDuration
			c.mu.Unlock()
		},
		WriteStallEnd: func() {
			c.mu.Lock()
			if !c.since.IsZero() {
				c.sum += time.Since(c.since)
				c.since = time.Time{}
			}
			c.mu.Unlock()
		},
	}
}

// reset starts the sum over (a stall in progress counts from now).
func (c *stallClock) reset() {
	c.mu.Lock()
	c.sum, c.reasons = 0, nil
	c.flushes, c.compactions, c.flushDur, c.compactDur, c.flushApply = 0, 0, 0, 0, 0
	if !c.since.IsZero() {
		c.since = time.Now()
	}
	c.mu.Unlock()
}

// total returns the time stalled since reset, a stall in progress
// included.
func (c *stallClock) total() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.since.IsZero() {
		return c.sum
	}
	return c.sum + time.Since(c.since)
}

// String says what the stalls, flushes and compactions since reset took.
func (c *stallClock) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("stalls %v %v; %d flushes %v (+%v applying); %d compactions %v",
		c.sum.Round(time.Millisecond), c.reasons, c.flushes, c.flushDur.Round(time.Millisecond), c.flushApply.Round(time.Millisecond),
		c.compactions, c.compactDur.Round(time.Millisecond))
}
