//go:build unix

package pebblefs

import (
	"time"
	"weak"
)

// How often the fresh files compare the memory cgroup's working set with
// its limit: every memoryCheckEvery while the limit is far, and sooner
// as the working set nears it (see checkAfter), down to every
// memoryCheckFastest. Reading memory.usage_in_bytes costs a few
// microseconds, memory.stat (read only near the limit) tens.
const (
	memoryCheckEvery   = 50 * time.Millisecond
	memoryCheckFastest = time.Millisecond
)

// heapGrowth is how fast the watcher assumes the working set may grow
// when it has not seen it grow faster, in bytes per millisecond (1 GiB
// a second): a Go program faulting in fresh heap pages runs at about
// that pace. A watcher polling every 50 ms alone let a heap growing in
// 2 MiB steps, back to back, past 96 MiB of fresh files in a 160 MiB
// cgroup, and the process was OOM-killed in 6 runs of 6.
const heapGrowth int64 = 1 << 20

// checkAfter returns how long the watcher may wait before it reads the
// working set again, now ws against memMax, having grown by grew since
// the last check, since ago: the time the working set takes to reach
// the point where the fresh files give way, at the pace it grew (over a
// millisecond at least) or at heapGrowth, whichever is faster; between
// memoryCheckFastest and every.
func checkAfter(ws, memMax, grew int64, since, every time.Duration) time.Duration {
	gap := memMax - headroom(memMax) - ws
	if gap <= 0 {
		return memoryCheckFastest
	}
	perMs := max(heapGrowth, grew/max(since.Milliseconds(), 1))
	return min(max(time.Duration(gap/perMs)*time.Millisecond, memoryCheckFastest), every)
}

// headroom is how near its limit memMax a memory cgroup's working set
// may come before the fresh files give way: a sixty-fourth of it,
// between 4 and 32 MiB (6 MiB in 384). Pebble's data-fits benchmark
// (384 MiB, 256 of them fresh files) runs its scans at 365-382 MiB: a
// thirty-second gave way in some runs, and the store, no longer fitting
// the fresh files, read from the device (YCSB E 0.85x the runs that did
// not).
func headroom(memMax int64) int64 { return min(max(memMax/64, 4<<20), 32<<20) }

// giveWay moves the fresh files' limit by the memory cgroup's working
// set ws, and ahead, what it is expected to grow by before the next
// check, against its limit memMax. Once ws and ahead come within
// headroom(memMax) of it, the
// fresh files unmap what takes ws back to memMax less one and a half
// headrooms: they are the one cache pebblefs holds that the kernel
// cannot reclaim, and the cgroup kills the process when its memory
// outgrows the limit (a 256 MiB budget in a 384 MiB cgroup left Go's
// heap 40 MiB, and YCSB E's scans were OOM-killed once in six runs).
// Below two headrooms the limit climbs back towards the budget, to what
// the fresh files hold plus the memory between ws and two headrooms
// below the limit: the fresh files can then grow between two checks
// only into memory the cgroup has, however fast reads fill them.
//
// Each FS's fresh files watch on their own: several in one process
// give way together, more than one would need to.
func (c *freshFiles) giveWay(ws, ahead, memMax int64) {
	room := headroom(memMax)
	lim := c.limit.Load()
	switch {
	case ws+ahead > memMax-room:
		c.setLimit(min(lim, c.held()) - (ws + ahead - (memMax - room)) - room/2)
	case ws < floor(memMax) && lim < c.budget:
		c.setLimit(max(lim, c.held()+floor(memMax)-ws))
	}
}

// setLimit sets what the fresh files may hold, between 0 and the
// budget, and unmaps what they hold over it: spare chunks first, then
// the least recently read complete files' chunks, compactions' outputs
// before flushes'. An evicted file fills again as it is read once the
// store fits the limit.
func (c *freshFiles) setLimit(n int64) {
	c.mu.Lock()
	c.limit.Store(min(max(n, 0), c.budget)) // under mu, for held's readers
	c.mu.Unlock()
	for {
		c.mu.Lock()
		c.freeSpare()
		if c.used <= c.limit.Load() {
			c.mu.Unlock()
			return
		}
		victim := c.oldestComplete(true)
		c.mu.Unlock()
		if victim == nil {
			return
		}
		c.evict(victim) // its chunks come back through release, unmapped
	}
}

// memorySource is what the fresh files watch: a memory cgroup's working
// set against its limit.
type memorySource struct {
	workingSet func(floor int64) (ws, usage int64, err error)
	limit      int64
	// notify, when set, asks for a send on crossed each time the usage
	// crosses floor, and returns what ends that. The watcher calls it
	// from its goroutine, not New's (registering a v1 threshold waits
	// for an RCU grace period, 5-24 ms here), and polls alone when it
	// fails.
	notify  func(floor int64) (crossed <-chan struct{}, release func(), err error)
	release func() // called once the watcher ends (nil: nothing to release)
}

// floor is the working set below which the fresh files' limit climbs
// back, two headrooms below the limit: the watcher needs memory.stat
// only above it, and a crossing of it wakes the watcher at once where
// the kernel signals one (notifyAbove).
func floor(memMax int64) int64 { return memMax - 2*headroom(memMax) }

// watch calls giveWay with src's working set against its limit, at most
// every interval, sooner near the limit (checkAfter) and at once when
// src says the usage crossed the floor, from a goroutine that ends when
// the working set cannot be read or c is no longer reachable (an FS has
// no Close), and closes the channel it returns then.
//
// A usage that rose at the last two checks that saw it change is
// expected to rise by the smaller of the two again before the next, and
// one that rose by more than a headroom at once by as much again: the
// fresh files give way a check ahead of a heap that climbs. One that
// only wobbles within a headroom (a rise, a fall) is expected to rise
// by nothing, or every rise would take a little more from the fresh
// files, for good. (Growing 2 MiB at a time back to back in 160 MiB,
// the README's program peaked at 152-155 MiB so, at 156-160 MiB with
// the two-rise rule alone.) With nothing to give (no fresh file held,
// a limit of nothing) the watcher looks at its slowest pace, for room
// to climb back into.
func (c *freshFiles) watch(src memorySource, every time.Duration) <-chan struct{} {
	w := weak.Make(c)
	memMax := src.limit
	done := make(chan struct{})
	go func() {
		defer close(done)
		if src.release != nil {
			defer src.release()
		}
		var crossed <-chan struct{}
		if src.notify != nil {
			if ch, release, err := src.notify(floor(memMax)); err == nil {
				crossed = ch
				defer release()
				if c := w.Value(); c != nil {
					c.armed.Store(true)
				}
			}
		}
		t := time.NewTimer(every)
		defer t.Stop()
		prev, prevAt, lastRise := int64(-1), time.Now(), int64(0)
		for {
			woken := false
			select {
			case <-t.C:
			case <-crossed:
				woken = true
			}
			c := w.Value()
			if c == nil {
				return
			}
			if woken {
				c.woken.Add(1)
				if time.Since(prevAt) < memoryCheckFastest {
					continue // the timer's check is due within a millisecond anyway
				}
			}
			ws, usage, err := src.workingSet(floor(memMax))
			if err != nil {
				return
			}
			// Rises are the usage's: the working set is measured one of
			// two ways (exactly only above the floor), and a switch
			// between them is no growth.
			now, rise := time.Now(), int64(0)
			if prev >= 0 {
				rise = max(usage-prev, 0)
			}
			ahead := min(rise, lastRise)
			if rise > headroom(memMax) {
				ahead = rise
			}
			c.giveWay(ws, ahead, memMax)
			next := checkAfter(ws+ahead, memMax, rise, now.Sub(prevAt), every)
			if c.held() == 0 && c.limit.Load() == 0 {
				next = every
			}
			t.Reset(next)
			if usage != prev { // a check that saw no change keeps the last one's rise
				lastRise = rise
			}
			prev, prevAt = usage, now
		}
	}()
	return done
}
