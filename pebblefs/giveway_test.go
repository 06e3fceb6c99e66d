//go:build unix

package pebblefs

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestFreshSetLimit: a lowered limit unmaps spare chunks and then the
// least recently read files' chunks until the fresh files fit it, while
// readers go on reading the right bytes (from the device when their
// file was evicted); raised again, an evicted file fills again.
func TestFreshSetLimit(t *testing.T) {
	dir := testenv.Dir(t)
	const budget = 16 * freshChunk
	fsys := newFS(&Options{FreshFiles: budget})
	c := fsys.fresh
	name := func(i int) string { return filepath.Join(dir, fmt.Sprintf("%06d.sst", i)) }
	data := map[int][]byte{}
	for i := range 4 {
		data[i] = pattern(uint64(i), 3*freshChunk-100)
		writeAll(t, fsys, name(i), data[i], 8192).Close()
	}
	if err := fsys.Remove(name(3)); err != nil { // its 3 chunks become spares
		t.Fatal(err)
	}
	files := map[int]*readFile{}
	for _, i := range []int{0, 2, 1} { // 1 read last, 0 least recently
		f, fresh := openRead(t, fsys, name(i))
		defer f.Close()
		if !fresh {
			t.Fatalf("file %d is not in memory", i)
		}
		checkReads(t, f, data[i], uint64(i))
		files[i] = f
	}
	if got := c.held(); got != 12*freshChunk {
		t.Fatalf("fresh files hold %d chunks, want 12 (9 in files, 3 spare)", got/freshChunk)
	}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 3 {
		until(&wg, stop, func(k int) bool {
			checkReads(t, files[g], data[g], uint64(g*100+k))
			return true
		})
	}
	c.setLimit(4 * freshChunk)
	close(stop)
	wg.Wait()
	if got := c.held(); got > 4*freshChunk {
		t.Fatalf("after setLimit(4 chunks) the fresh files hold %d chunks", got/freshChunk)
	}
	if got := c.gaveWay.Load(); got < 8*freshChunk {
		t.Fatalf("gaveWay %d chunks, want at least 8", got/freshChunk)
	}
	if c.fills() {
		t.Fatal("a 9-chunk store fills under a 4-chunk limit")
	}
	// A new file cannot take more than the limit either.
	writeAll(t, fsys, name(5), pattern(5, 3*freshChunk), 8192).Close()
	if got := c.held(); got > 4*freshChunk {
		t.Fatalf("a new file took the fresh files to %d chunks over a limit of 4", got/freshChunk)
	}
	for i, f := range files {
		checkReads(t, f, data[i], uint64(i+10))
	}

	c.setLimit(2 * budget) // capped at the budget
	if got := c.limit.Load(); got != budget {
		t.Fatalf("limit %d chunks after raising it past the budget, want %d", got/freshChunk, budget/freshChunk)
	}
	// At least two files were evicted for the limit (which two, the
	// readers decided), and the new file's chunks dropped at most one.
	evicted := -1
	for i, f := range files {
		c.mu.Lock()
		kept := c.files[f.fresh.Load().id] == f.fresh.Load()
		c.mu.Unlock()
		if kept && !f.fresh.Load().whole() {
			evicted = i
		}
	}
	if evicted < 0 {
		t.Fatal("no file was evicted and kept to fill again")
	}
	f := files[evicted]
	if _, err := f.ReadAt(make([]byte, len(data[evicted])), 0); err != nil {
		t.Fatal(err)
	}
	if !f.fresh.Load().whole() {
		t.Fatal("an evicted file read end to end under a raised limit is not in memory again")
	}
	checkReads(t, f, data[evicted], 99)
}

// TestFreshGiveWay: giveWay lowers the limit to take the working set a
// headroom and a half below the cgroup's limit once it comes within one
// headroom, leaves it between one and two, and below two raises it to
// what the fresh files hold plus the room below two headrooms, no
// higher than the budget.
func TestFreshGiveWay(t *testing.T) {
	dir := testenv.Dir(t)
	const budget = 64 << 20
	const memMax = 512 << 20
	room := headroom(memMax)
	if room != 8<<20 {
		t.Fatalf("headroom(512 MiB) = %d MiB, want 8", room>>20)
	}
	fsys := newFS(&Options{FreshFiles: budget})
	c := fsys.fresh
	for i := range 6 {
		writeAll(t, fsys, filepath.Join(dir, fmt.Sprintf("%06d.sst", i)), pattern(uint64(i), 8<<20), 1<<20).Close()
	}
	if got := c.held(); got != 48<<20 {
		t.Fatalf("fresh files hold %d MiB, want 48", got>>20)
	}
	c.giveWay(memMax-room-1, 0, memMax) // within two headrooms: hold
	if got := c.limit.Load(); got != budget {
		t.Fatalf("limit %d MiB with the working set a headroom below the cgroup's limit, want the budget", got>>20)
	}
	c.giveWay(memMax-room+(4<<20), 0, memMax) // 4 MiB into the headroom
	want := int64(48<<20) - 4<<20 - room/2
	if got := c.limit.Load(); got != want {
		t.Fatalf("limit %d MiB, want %d", got>>20, want>>20)
	}
	if got := c.held(); got > want {
		t.Fatalf("fresh files hold %d MiB over the limit of %d", got>>20, want>>20)
	}
	c.giveWay(memMax+(64<<20), 0, memMax) // far over: everything goes
	if got := c.held(); got != 0 || c.limit.Load() != 0 {
		t.Fatalf("fresh files hold %d MiB at a limit of %d past the cgroup's limit", got>>20, c.limit.Load()>>20)
	}
	// Below two headrooms: what they hold plus the room below them.
	c.giveWay(memMax-2*room-(20<<20), 0, memMax)
	if got := c.limit.Load(); got != 20<<20 {
		t.Fatalf("limit %d MiB with 20 MiB of room, want 20", got>>20)
	}
	c.giveWay(memMax-2*room-(10<<20), 0, memMax) // never lowered there
	if got := c.limit.Load(); got != 20<<20 {
		t.Fatalf("limit %d MiB after less room, want it kept at 20", got>>20)
	}
	c.giveWay(0, 0, memMax)
	if got := c.limit.Load(); got != budget {
		t.Fatalf("limit %d MiB, want the budget, %d, and no more", got>>20, budget>>20)
	}
}

// TestFreshWatch: the watcher gives way while the working set is high
// and climbs back when it falls; it ends when its source fails, and
// when the fresh files are no longer reachable.
func TestFreshWatch(t *testing.T) {
	const budget = 64 << 20
	const memMax = 512 << 20
	var ws, calls atomic.Int64
	source := func(int64) (int64, int64, error) {
		calls.Add(1)
		return ws.Load(), ws.Load(), nil
	}
	c := newFreshFiles(budget)
	done := c.watch(memorySource{workingSet: source, limit: memMax}, time.Millisecond)
	wait := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the watcher did not %s in 5 s (limit %d MiB)", what, c.limit.Load()>>20)
			}
		}
	}
	ws.Store(memMax)
	wait("give way", func() bool { return c.limit.Load() == 0 })
	ws.Store(memMax / 2)
	wait("climb back", func() bool { return c.limit.Load() == budget })

	c = nil
	if !testenv.Collected(func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}) {
		t.Fatal("the watcher goes on after its fresh files were collected")
	}

	var failed atomic.Int64
	d := newFreshFiles(budget)
	done = d.watch(memorySource{workingSet: func(int64) (int64, int64, error) { failed.Add(1); return 0, 0, errors.New("gone") }, limit: memMax}, time.Millisecond)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the watcher goes on after its source failed")
	}
	if got := failed.Load(); got != 1 {
		t.Fatalf("the watcher asked a failing source %d times, want 1", got)
	}
	if d.limit.Load() != budget {
		t.Fatal("a failing source moved the limit")
	}
}

// TestCheckAfter: the watcher checks at its slowest pace far from the
// limit, sooner as the working set nears it, at once past the point of
// giving way, and sooner still when the working set grew faster than
// heapGrowth.
func TestCheckAfter(t *testing.T) {
	const memMax = 1 << 30 // headroom 16 MiB
	const every = 50 * time.Millisecond
	for _, c := range []struct {
		ws, grew int64
		last     time.Duration
		want     time.Duration
	}{
		{ws: 0, want: every},
		{ws: memMax - 16<<20 - 20<<20, want: 20 * time.Millisecond},                                             // 20 MiB to go at 1 MiB a ms
		{ws: memMax - 16<<20 - 20<<20, grew: 40 << 20, last: 10 * time.Millisecond, want: 5 * time.Millisecond}, // at 4 MiB a ms
		{ws: memMax - 16<<20 - 20<<20, grew: 1 << 20, last: 10 * time.Millisecond, want: 20 * time.Millisecond}, // slower than heapGrowth
		{ws: memMax - 16<<20 - 20<<20, grew: 40 << 20, want: memoryCheckFastest},                                // as if in a millisecond
		{ws: memMax - 16<<20, want: memoryCheckFastest},
		{ws: memMax + 1<<20, want: memoryCheckFastest},
	} {
		if got := checkAfter(c.ws, memMax, c.grew, c.last, every); got != c.want {
			t.Errorf("checkAfter(%d MiB below, grew %d MiB in %v) = %v, want %v", (memMax-c.ws)>>20, c.grew>>20, c.last, got, c.want)
		}
	}
}

// scripted is a watcher's memory cgroup that a test moves: it sets the
// usage (the working set is the usage less inactive above the floor, as
// memoryCgroup measures it) and wakes the watcher through its
// notification, waiting for the check.
type scripted struct {
	t             *testing.T
	usage, checks atomic.Int64
	inactive      int64
	crossed       chan struct{}
	notified      atomic.Bool
	c             *freshFiles
}

func watchScripted(t *testing.T, memMax, budget, inactive int64) *scripted {
	s := &scripted{t: t, inactive: inactive, crossed: make(chan struct{}), c: newFreshFiles(budget)}
	s.usage.Store(memMax / 2)
	src := memorySource{
		workingSet: func(floor int64) (int64, int64, error) {
			defer s.checks.Add(1)
			u := s.usage.Load()
			if u < floor {
				return u, u, nil
			}
			return u - s.inactive, u, nil
		},
		limit: memMax,
		notify: func(int64) (<-chan struct{}, func(), error) {
			s.notified.Store(true)
			return s.crossed, func() {}, nil
		},
	}
	s.c.watch(src, time.Hour)
	return s
}

// check sets the usage to u and has the watcher check it.
func (s *scripted) check(u int64) {
	s.t.Helper()
	s.usage.Store(u)
	n := s.checks.Load()
	time.Sleep(memoryCheckFastest) // a signal within a millisecond of the last check is dropped
	select {
	case s.crossed <- struct{}{}:
	case <-time.After(5 * time.Second):
		s.t.Fatalf("the watcher took no signal in 5 s (%d checks)", s.checks.Load())
	}
	for deadline := time.Now().Add(5 * time.Second); s.checks.Load() == n; time.Sleep(100 * time.Microsecond) {
		if time.Now().After(deadline) {
			s.t.Fatalf("the watcher did not check when signalled (%d checks)", n)
		}
	}
}

// limit returns the fresh files' limit once the watcher has finished the
// check it started: a signal goes through only when it waits again.
func (s *scripted) limit() int64 {
	s.t.Helper()
	s.check(s.usage.Load())
	return s.c.limit.Load()
}

// TestFreshWatchAhead: the watcher gives way a check ahead of a usage
// that rose at its last two checks, by the smaller rise, or by more than
// a headroom at once; it checks at
// once when signalled, however long its timer; it asks for the signal
// from its own goroutine.
func TestFreshWatchAhead(t *testing.T) {
	const memMax, budget = 512 << 20, 64 << 20 // headroom 8 MiB
	s := watchScripted(t, memMax, budget, 0)
	s.check(memMax - 30<<20)
	if !s.notified.Load() {
		t.Fatal("the watcher did not ask for the signal")
	}
	s.check(memMax - 20<<20) // one rise: nothing ahead
	if got := s.limit(); got != budget {
		t.Fatalf("limit %d MiB after one rise to 20 MiB below the limit, want the budget", got>>20)
	}
	// A second rise of 10 MiB: 10 below the limit, within its headroom
	// only with the next 10 MiB.
	s.check(memMax - 10<<20)
	if got := s.limit(); got >= budget {
		t.Fatal("the watcher did not give way ahead of a usage that rose twice")
	}

	// One rise of more than a headroom counts ahead at once.
	s = watchScripted(t, memMax, budget, 0)
	s.check(memMax - 40<<20)
	s.check(memMax - 20<<20)
	if got := s.limit(); got >= budget {
		t.Fatal("the watcher did not give way ahead of a usage that rose by 20 MiB at once")
	}
}

// TestFreshWatchWobble: a usage that rises and falls by turns just short
// of the limit's headroom, as Pebble's memtables and compactions move
// it, takes nothing from the fresh files, whichever way the working set
// is measured (exactly above the floor, as the usage below it: a switch
// between them is no growth); a rise that counted as growth took a
// little more at every turn, and the limit fell to nothing.
func TestFreshWatchWobble(t *testing.T) {
	const memMax, budget = 384 << 20, 64 << 20 // headroom 6 MiB, floor 372 MiB
	for _, c := range []struct{ lo, inactive int64 }{
		{374 << 20, 0},
		{371 << 20, 40 << 20}, // below the floor: the usage alone
	} {
		s := watchScripted(t, memMax, budget, c.inactive)
		for range 20 {
			s.check(c.lo)
			s.check(377 << 20)
		}
		if got := s.limit(); got != budget {
			t.Errorf("limit %d MiB after the usage wobbled between %d and 377 MiB of 384 (%d MiB inactive), want the budget", got>>20, c.lo>>20, c.inactive>>20)
		}
	}
}

// TestFreshGiveWayRace: readers of several files read the right bytes
// while the limit swings between nothing and the budget and a writer
// adds and removes files, dropping, evicting, filling and attaching
// again at once; at the end, with the limit back, every file fills
// again. Run it under -race for seconds.
func TestFreshGiveWayRace(t *testing.T) {
	dir := testenv.Dir(t)
	const budget = 16 * freshChunk
	fsys := newFS(&Options{FreshFiles: budget})
	c := fsys.fresh
	name := func(i int) string { return filepath.Join(dir, fmt.Sprintf("%06d.sst", i)) }
	const n = 4
	data := make([][]byte, n)
	var files []*readFile
	for i := range n {
		data[i] = pattern(uint64(i), 3*freshChunk-100)
		writeAll(t, fsys, name(i), data[i], 8192).Close()
		for range 2 {
			f, _ := openRead(t, fsys, name(i))
			defer f.Close()
			files = append(files, f)
		}
	}
	run := time.Second
	if testing.Short() {
		run = 200 * time.Millisecond
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		until(&wg, stop, func(k int) bool {
			i := (g + k) % len(files)
			checkReads(t, files[i], data[i/2], uint64(g<<20+k))
			return true
		})
	}
	until(&wg, stop, func(k int) bool {
		c.setLimit(int64(k%5) * budget / 4)
		time.Sleep(time.Millisecond)
		return true
	})
	until(&wg, stop, func(k int) bool {
		nm := name(100 + k%3)
		writeAll(t, fsys, nm, pattern(uint64(100+k), 2*freshChunk), 8192).Close()
		if err := fsys.Remove(nm); err != nil {
			t.Error(err)
			return false
		}
		return true
	})
	time.Sleep(run)
	close(stop)
	wg.Wait()

	c.setLimit(budget)
	if got := c.held(); got > budget {
		t.Fatalf("fresh files hold %d chunks, budget %d", got/freshChunk, budget/freshChunk)
	}
	for i, f := range files {
		if _, err := f.ReadAt(make([]byte, len(data[i/2])), 0); err != nil {
			t.Fatal(err)
		}
		if ff := f.fresh.Load(); ff == nil || !ff.whole() {
			t.Fatalf("reader %d: its file is not in memory again with the limit back", i)
		}
		checkReads(t, f, data[i/2], uint64(i))
	}
}

// until calls step(0), step(1) and so on from a goroutine of wg until
// stop is closed or step returns false.
func until(wg *sync.WaitGroup, stop <-chan struct{}, step func(k int) bool) {
	wg.Go(func() {
		for k := 0; ; k++ {
			select {
			case <-stop:
				return
			default:
			}
			if !step(k) {
				return
			}
		}
	})
}

var _ vfs.File = (*readFile)(nil)
