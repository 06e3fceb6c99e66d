//go:build linux

package pebblefs

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

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
