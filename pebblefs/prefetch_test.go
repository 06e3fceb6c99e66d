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
	// Dropped prefetches give their memory back as their reads end.
	for i := 0; fsys.ahead.used != 0 && i < 100; i++ {
		fsys.ahead.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
		fsys.ahead.mu.Lock()
	}
	if fsys.ahead.used != 0 {
		t.Fatalf("%d bytes of read-ahead not given back", fsys.ahead.used)
	}
}
