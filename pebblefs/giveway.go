//go:build unix

package pebblefs

import (
	"time"
	"weak"
)

// memoryCheckEvery is how often the fresh files compare the memory
// cgroup's working set with its limit: reading memory.usage_in_bytes
// costs a few microseconds, and a Go heap grows by tens of MiB in a
// second at most under Pebble's work.
const memoryCheckEvery = 50 * time.Millisecond

// headroom is how near its limit memMax a memory cgroup's working set
// may come before the fresh files give way: a sixty-fourth of it,
// between 4 and 32 MiB (6 MiB in 384). Pebble's data-fits benchmark
// (384 MiB, 256 of them fresh files) runs its scans at 365-382 MiB: a
// thirty-second gave way in some runs, and the store, no longer fitting
// the fresh files, read from the device (YCSB E 0.85x the runs that did
// not).
func headroom(memMax int64) int64 { return min(max(memMax/64, 4<<20), 32<<20) }

// giveWay moves the fresh files' limit by the memory cgroup's working
// set ws against its limit memMax. Within headroom(memMax) of it, the
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
func (c *freshFiles) giveWay(ws, memMax int64) {
	room := headroom(memMax)
	lim := c.limit.Load()
	switch {
	case ws > memMax-room:
		c.setLimit(min(lim, c.held()) - (ws - (memMax - room)) - room/2)
	case ws < memMax-2*room && lim < c.budget:
		c.setLimit(max(lim, c.held()+memMax-2*room-ws))
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

// watch calls giveWay every interval with workingSet's answer against
// memMax, from a goroutine that ends when workingSet fails or c is no
// longer reachable (an FS has no Close), and closes the channel it
// returns then.
func (c *freshFiles) watch(workingSet func(floor int64) (int64, error), memMax int64, every time.Duration) <-chan struct{} {
	w := weak.Make(c)
	floor := memMax - 2*headroom(memMax)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for range t.C {
			c := w.Value()
			if c == nil {
				return
			}
			ws, err := workingSet(floor)
			if err != nil {
				return
			}
			c.giveWay(ws, memMax)
		}
	}()
	return done
}
