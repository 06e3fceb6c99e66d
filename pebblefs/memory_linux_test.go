//go:build linux

package pebblefs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/dio-storage/dio/internal/testenv"
)

// rssAnon returns the process's resident anonymous memory (RssAnon in
// /proc/self/status) after a GC has handed the Go heap's free pages back:
// what is left is the live heap, Pebble's manual memory and dio's aligned
// buffers, which are anonymous mappings outside the heap.
func rssAnon(t *testing.T) int64 {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "RssAnon:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no RssAnon in /proc/self/status")
	return 0
}

// heapInUse returns the Go heap's live bytes, to take out of rssAnon.
func heapInUse() int64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse + m.StackInuse)
}

// openFilesMemory builds a store of files sstables in L0 (automatic
// compactions off), reopens it and reads one key of every sstable, so
// that Pebble's table cache holds them all open, and returns the memory
// that took outside the Go heap: the file layer's own (Pebble's block
// cache is 1 MiB, its memtables untouched by reads).
func openFilesMemory(t *testing.T, fsys vfs.FS, files int) int64 {
	dir := testenv.Dir(t)
	cache := pebble.NewCache(1 << 20)
	defer cache.Unref()
	opts := func() *pebble.Options {
		o := &pebble.Options{
			FS:                          fsys,
			Cache:                       cache,
			Logger:                      quiet{},
			DisableAutomaticCompactions: true,
			L0StopWritesThreshold:       files + 100,
			L0CompactionThreshold:       files + 100,
			MaxOpenFiles:                20 * files,
		}
		// Small data blocks, one index block: each sstable's index is
		// about 30 KiB, as a 4 MiB sstable's of 1 KiB records is.
		o.Levels[0].BlockSize = 64
		o.Levels[0].IndexBlockSize = 1 << 20
		return o
	}
	db, err := pebble.Open(dir, opts())
	if err != nil {
		t.Fatal(err)
	}
	const perFile = 2500 // keys per sstable
	for f := range files {
		b := db.NewBatch()
		for k := range perFile {
			i := f*perFile + k
			if err := b.Set(key(i), value(i, 0)[:64], nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = pebble.Open(dir, opts())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	before := rssAnon(t) - heapInUse()
	for f := range files {
		v, closer, err := db.Get(key(f * perFile))
		if err != nil {
			t.Fatalf("file %d: %v", f, err)
		}
		if len(v) != 64 {
			t.Fatalf("file %d: %d bytes", f, len(v))
		}
		closer.Close()
	}
	m := db.Metrics()
	if n := m.FileCache.TableCount; n < m.Levels[0].TablesCount {
		t.Fatalf("%d tables open, want the %d in L0", n, m.Levels[0].TablesCount)
	}
	return rssAnon(t) - heapInUse() - before
}

// TestMemoryOpenFiles reports the memory beyond Go's heap that Pebble's
// open sstables hold on pebblefs, against vfs.Default, as the number of
// open files grows: a file layer whose memory is a budget holds the same
// at 600 files as at 50.
func TestMemoryOpenFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds stores of hundreds of sstables")
	}
	counts := []int{50, 200, 600}
	var rows []string
	worst := int64(0)
	for _, n := range counts {
		def := openFilesMemory(t, vfs.Default, n)
		dio := openFilesMemory(t, New(&Options{FreshFiles: -1}), n) // every read from the device
		rows = append(rows, fmt.Sprintf("%4d open sstables: pebblefs %6.1f MiB, vfs.Default %6.1f MiB, pebblefs over vfs.Default %6.1f MiB",
			n, mib(dio), mib(def), mib(dio-def)))
		worst = max(worst, dio-def)
	}
	for _, r := range rows {
		t.Log(r)
	}
	if worst > maxFileLayerMemory {
		t.Errorf("pebblefs held %.1f MiB beyond vfs.Default with its sstables open, want at most %.0f MiB whatever their number", mib(worst), mib(maxFileLayerMemory))
	}
}

// maxFileLayerMemory is issue 31's bound on what pebblefs holds beyond
// Pebble's block cache and memtables, at any number of open files.
const maxFileLayerMemory = 32 << 20

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// TestMemoryBudget: many compactions' inputs read in order at once
// (vfs.SequentialReadsOption), Prefetches, and hundreds of files open
// and read at random, all on a small Options.Memory: what pebblefs holds
// (its own accounting, and the process's anonymous memory outside the Go
// heap while every sequential reader holds its read-ahead) stays within
// the budget, and every byte read is right. Before issue 31's fix each
// input the budget could not hold got 128 KiB past it: 96 inputs held
// about 12 MiB beyond a 4 MiB budget.
func TestMemoryBudget(t *testing.T) {
	const (
		budget = 4 << 20
		seqs   = 96  // sequential readers at once: compactions' inputs
		opens  = 300 // files open for random reads besides
		size   = 1 << 20
	)
	dir := testenv.Dir(t)
	fsys := newFS(&Options{Memory: budget, FreshFiles: -1}) // every read from the device
	data := pattern(31, size)
	names := make([]string, seqs)
	for i := range names {
		names[i] = filepath.Join(dir, fmt.Sprintf("%06d.sst", i))
		writeAll(t, fsys, names[i], data, 4096).Close()
	}
	// One round of opens and reads first, so that the pool's buffers and
	// the runtime's own first allocations are in the baseline.
	warm, err := fsys.Open(names[0], vfs.SequentialReadsOption)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := warm.ReadAt(make([]byte, 4096), 0); err != nil {
		t.Fatal(err)
	}
	warm.Close()
	before := rssAnon(t) - heapInUse()

	var files []vfs.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for i := range opens {
		f, err := fsys.Open(names[i%seqs])
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		if err := f.Prefetch(int64(i%8)*64<<10, 256<<10); err != nil {
			t.Fatal(err)
		}
	}
	seq := make([]vfs.File, seqs)
	for i := range seq {
		if seq[i], err = fsys.Open(names[i], vfs.SequentialReadsOption); err != nil {
			t.Fatal(err)
		}
		files = append(files, seq[i])
	}
	// Each sequential reader reads the first half of its file block by
	// block as Pebble's compactions do, all at once, and stops there
	// holding its read-ahead; random readers read meanwhile.
	read := func(f vfs.File, off int64, n int) error {
		p := make([]byte, n)
		if _, err := f.ReadAt(p, off); err != nil {
			return err
		}
		if !bytes.Equal(p, data[off:off+int64(n)]) {
			return fmt.Errorf("read at %d: wrong bytes", off)
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, seqs+opens)
	for _, f := range seq {
		wg.Go(func() {
			for off := int64(0); off+4096+5 < size/2; off += 4096 + 5 {
				if err := read(f, off, 4096+5); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for i, f := range files[:opens] {
		wg.Go(func() {
			for k := range 8 {
				if err := read(f, int64((i*7+k*131)%200)*4096, 4096+5); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	m := fsys.Memory()
	held := rssAnon(t) - heapInUse() - before
	t.Logf("%d sequential readers, %d open files, Options.Memory %d MiB: pebblefs counts %.1f MiB (buffers %.1f, read-ahead %.1f, denied %d), anonymous memory outside the heap grew %.1f MiB",
		seqs, opens, budget>>20, mib(m.Total()), mib(m.Buffers), mib(m.ReadAhead), m.ReadAheadDenied, mib(held))
	if m.Buffers+m.ReadAhead > budget {
		t.Errorf("pebblefs counts %.1f MiB of buffers and read-ahead, over its %d MiB budget", mib(m.Buffers+m.ReadAhead), budget>>20)
	}
	// The slack is the runtime's: goroutine stacks and the heap's own
	// metadata outside HeapInuse for ~400 goroutines and files.
	// The race detector's shadow memory is anonymous and outside the
	// heap too: only pebblefs's own count holds under -race.
	const slack = 2 << 20
	if held > budget+slack && !testenv.Race {
		t.Errorf("anonymous memory outside the Go heap grew %.1f MiB with the budget at %d MiB", mib(held), budget>>20)
	}
	for _, f := range files {
		f.Close()
	}
	files = nil
	// What stays is the shelf: prefetch buffers kept for the next
	// Prefetches, within the prefetches' half of the read-ahead budget.
	if n := fsys.ahead.inUse(); n != 0 {
		t.Errorf("%d bytes of read-ahead still in use with every file closed", n)
	}
	if m := fsys.Memory(); m.ReadAhead > fsys.ahead.limit/2 {
		t.Errorf("%d bytes of prefetch buffers shelved, over half the read-ahead budget (%d)", m.ReadAhead, fsys.ahead.limit)
	}
}

// TestGoMemoryLimit: the limit is the process's memory less Pebble's
// block cache and memtables and pebblefs's budgets, found through a
// wrapper, less a sixteenth; never under its floor.
func TestGoMemoryLimit(t *testing.T) {
	lim := memoryLimit()
	if lim < 4<<30 {
		t.Skipf("the process may use %d MiB; the test sizes caches for 4 GiB", lim>>20)
	}
	cache := pebble.NewCache(1 << 30)
	defer cache.Unref()
	o := &pebble.Options{Cache: cache, MemTableSize: 64 << 20, MemTableStopWritesThreshold: 4}
	fsys := New(&Options{Memory: 48 << 20, FreshFiles: 256 << 20})
	want := lim - 1<<30 - 256<<20 - 48<<20 - 256<<20 - lim/16
	wrapped, closer := vfs.WithDiskHealthChecks(fsys, time.Hour, nil, func(vfs.DiskSlowInfo) {})
	defer closer.Close()
	got := GoMemoryLimit(wrapped, o)
	if got != want {
		t.Errorf("GoMemoryLimit = %d MiB, want %d MiB (limit %d MiB)", got>>20, want>>20, lim>>20)
	}
	if d := GoMemoryLimit(vfs.Default, o); d != want+256<<20+48<<20 {
		t.Errorf("GoMemoryLimit on vfs.Default = %d MiB, want %d MiB", d>>20, (want+256<<20+48<<20)>>20)
	}
	// CacheSize, which pebble.Open makes a cache of when Cache is nil,
	// counts as Cache does.
	sized := &pebble.Options{CacheSize: 1 << 30, MemTableSize: 64 << 20, MemTableStopWritesThreshold: 4}
	if got := GoMemoryLimit(wrapped, sized); got != want {
		t.Errorf("GoMemoryLimit with CacheSize = %d MiB, want %d MiB", got>>20, want>>20)
	}
	huge := pebble.NewCache(lim)
	defer huge.Unref()
	if got := GoMemoryLimit(fsys, &pebble.Options{Cache: huge}); got != minGoMemoryLimit {
		t.Errorf("GoMemoryLimit with a cache past the limit = %d, want the floor %d", got, minGoMemoryLimit)
	}
}
