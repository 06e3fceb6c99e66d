//go:build unix

package pebblefs

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/dio-storage/dio/internal/testenv"
)

// TestPrefetch: Prefetch reads ahead into memory and the ReadAt that
// follows inside its range is served from it, byte for byte, as Pebble's
// iterators read (Prefetch, then blocks in order); reads outside it go
// to the device; its memory goes back to the budget when a read passes
// its end and when the file closes, also with its read in flight; many
// goroutines on one file stay right (run under -race).
func TestPrefetch(t *testing.T) {
	dir := testenv.Dir(t)
	fsys := newFS(&Options{FreshFiles: -1}) // every read from the device
	name := filepath.Join(dir, "000001.sst")
	data := pattern(7, 3<<20+777)
	writeAll(t, fsys, name, data, 4096).Close()

	f, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	rf := f.(*readFile)
	if err := f.Prefetch(100<<10, 256<<10); err != nil {
		t.Fatal(err)
	}
	if rf.pre.p == nil || fsys.ahead.used == 0 {
		t.Fatal("Prefetch read nothing ahead")
	}
	for off := int64(100 << 10); off < 356<<10; off += 4096 + 5 {
		p := make([]byte, 4096+5)
		if _, err := f.ReadAt(p, off); err != nil || !bytes.Equal(p, data[off:off+int64(len(p))]) {
			t.Fatalf("ReadAt at %d: %v, equal %v", off, err, bytes.Equal(p, data[off:off+int64(len(p))]))
		}
	}
	if rf.pre.p != nil {
		t.Fatal("a read past the prefetch's end kept it")
	}
	f.Close()

	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 50 {
				f, err := fsys.Open(name)
				if err != nil {
					t.Error(err)
					return
				}
				for range 20 {
					off := int64(r.IntN(len(data)))
					if r.IntN(3) == 0 {
						_ = f.Prefetch(off, int64(r.IntN(300<<10)))
						continue
					}
					n := min(1+r.IntN(70<<10), len(data)-int(off))
					p := make([]byte, n)
					if _, err := f.ReadAt(p, off); err != nil || !bytes.Equal(p, data[off:off+int64(n)]) {
						t.Errorf("ReadAt %d at %d: %v", n, off, err)
						return
					}
				}
				f.Close() // often with a prefetch in flight
			}
		})
	}
	wg.Wait()
	fsys.ahead.mu.Lock()
	defer fsys.ahead.mu.Unlock()
	// Dropped prefetches give their buffers back to the shelf as their
	// reads end; the shelf stays within the prefetches' half.
	for i := 0; fsys.ahead.used != fsys.ahead.shelved && i < 100; i++ {
		fsys.ahead.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
		fsys.ahead.mu.Lock()
	}
	if n := fsys.ahead.used - fsys.ahead.shelved; n != 0 {
		t.Fatalf("%d bytes of read-ahead not given back", n)
	}
	if fsys.ahead.shelved != fsys.ahead.prefetched || fsys.ahead.shelved > fsys.ahead.limit/2 {
		t.Fatalf("shelved %d, prefetch buffers %d, budget %d", fsys.ahead.shelved, fsys.ahead.prefetched, fsys.ahead.limit)
	}
}

// TestPrefetchShelf: a prefetch's buffer goes to the shelf when its
// prefetch is dropped and serves the next Prefetch of its size, without
// new memory; Prefetches are sized 64, 128 or 256 KiB (and two blocks);
// a sequential file that needs the shelf's bytes gets them, the shelf
// freed.
func TestPrefetchShelf(t *testing.T) {
	const slack = 2 * poolAlign // the aligned span's
	for n, want := range map[int64]int64{1: 64 << 10, 64 << 10: 64 << 10, 64<<10 + 1: 128 << 10, 200 << 10: 256 << 10, 1 << 20: 256 << 10} {
		if got := prefetchSize(n) - slack; got != want {
			t.Errorf("prefetchSize(%d) = %d, want %d", n, got, want)
		}
	}
	dir := testenv.Dir(t)
	fsys := newFS(&Options{Memory: 3 << 20, FreshFiles: -1}) // read-ahead budget 2 MiB
	name := filepath.Join(dir, "000001.sst")
	data := pattern(9, 1<<20)
	writeAll(t, fsys, name, data, 4096).Close()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	read := func(off int64) {
		t.Helper()
		p := make([]byte, 4096)
		if _, err := f.ReadAt(p, off); err != nil || !bytes.Equal(p, data[off:off+4096]) {
			t.Fatalf("ReadAt at %d: %v", off, err)
		}
	}
	settle := func() (used, shelved int64) {
		t.Helper()
		for range 100 {
			fsys.ahead.mu.Lock()
			used, shelved = fsys.ahead.used, fsys.ahead.shelved
			fsys.ahead.mu.Unlock()
			if used == shelved {
				return used, shelved
			}
			time.Sleep(time.Millisecond)
		}
		t.Fatalf("read-ahead in use %d, shelved %d, with no prefetch left", used, shelved)
		return
	}

	if err := f.Prefetch(0, 256<<10); err != nil {
		t.Fatal(err)
	}
	first := f.(*readFile).pre.p.b
	read(4096)
	read(256<<10 - 2048) // past its end: dropped
	if used, shelved := settle(); used != 256<<10+slack || shelved != 256<<10+slack {
		t.Fatalf("after one prefetch: used %d, shelved %d, want its 256 KiB on the shelf", used, shelved)
	}
	if err := f.Prefetch(300<<10, 256<<10); err != nil {
		t.Fatal(err)
	}
	if b := f.(*readFile).pre.p.b; b != first {
		t.Fatal("a Prefetch of the same size mapped a new buffer with one on the shelf")
	}
	read(300 << 10)
	if err := f.Prefetch(700<<10, 64<<10); err != nil { // replaces the 256 KiB one
		t.Fatal(err)
	}
	read(700 << 10) // inside it: it stays
	fsys.ahead.mu.Lock()
	used, shelved := fsys.ahead.used, fsys.ahead.shelved
	fsys.ahead.mu.Unlock()
	if used != 256<<10+64<<10+2*slack || shelved != 256<<10+slack {
		t.Fatalf("a 64 KiB prefetch beside a shelved 256 KiB buffer: used %d, shelved %d", used, shelved)
	}

	// A sequential file asks for its read-ahead: the shelf makes room.
	ra, put := fsys.ahead.take(1 << 20)
	if put == nil || ra < 256<<10 {
		t.Fatalf("sequential read-ahead %d with the shelf holding room for more", ra)
	}
	fsys.ahead.mu.Lock()
	used, shelved, limit := fsys.ahead.used, fsys.ahead.shelved, fsys.ahead.limit
	fsys.ahead.mu.Unlock()
	if shelved != 0 {
		t.Fatalf("the shelf kept %d bytes while a sequential file got %d of read-ahead, not the %d it asked", shelved, ra, 1<<20)
	}
	if used > limit {
		t.Fatalf("read-ahead %d over its budget %d", used, limit)
	}
	put()
	t.Logf("read-ahead %d granted; used %d, shelved %d of %d", ra, used, shelved, limit)
}
