//go:build unix

package pebblefs

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/dio-storage/dio/internal/testenv"
)

func key(i int) []byte { return fmt.Appendf(nil, "key-%08d", i) }

// value is i's value in generation gen, 1 KiB.
func value(i, gen int) []byte {
	v := bytes.Repeat([]byte{byte(i), byte(gen)}, 512)
	copy(v, fmt.Sprintf("%d/%d", i, gen))
	return v
}

func pebbleOptions(fsys vfs.FS) *pebble.Options {
	o := &pebble.Options{
		FS:                    fsys,
		Logger:                quiet{},
		MemTableSize:          1 << 20,
		L0CompactionThreshold: 2,
	}
	o.TargetFileSizes[0] = 256 << 10
	return o
}

// checkGen reads every key and checks it holds generation gen (keys
// below del are deleted).
func checkGen(t *testing.T, db *pebble.DB, n, gen, del int) {
	t.Helper()
	for i := range n {
		v, closer, err := db.Get(key(i))
		if i < del {
			if err != pebble.ErrNotFound {
				t.Fatalf("key %d: %v, want deleted", i, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
		if !bytes.Equal(v, value(i, gen)) {
			t.Fatalf("key %d: wrong value %q", i, v[:12])
		}
		closer.Close()
	}
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for it.First(); it.Valid(); it.Next() {
		count++
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if count != n-del {
		t.Fatalf("iterator saw %d keys, want %d", count, n-del)
	}
}

// TestPebble runs Pebble on pebblefs: writes through the WAL, flushes,
// compacts, takes a checkpoint (which reads the live MANIFEST and WAL),
// closes and reopens both the store and the checkpoint.
func TestPebble(t *testing.T) {
	dir := testenv.Dir(t)
	fsys := New(nil)
	const n = 6000
	db, err := pebble.Open(dir, pebbleOptions(fsys))
	if err != nil {
		t.Fatal(err)
	}
	for gen := range 3 {
		b := db.NewBatch()
		for i := range n {
			if err := b.Set(key(i), value(i, gen), nil); err != nil {
				t.Fatal(err)
			}
			if b.Len() > 64<<10 {
				if err := b.Commit(pebble.Sync); err != nil {
					t.Fatal(err)
				}
				b = db.NewBatch()
			}
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		if gen < 2 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.DeleteRange(key(0), key(100), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Compact(context.Background(), key(0), key(n), true); err != nil {
		t.Fatal(err)
	}
	checkGen(t, db, n, 2, 100)
	if m := db.Metrics(); m.Compact.Count == 0 || m.Flush.Count == 0 {
		t.Fatalf("no compaction or flush ran: %d, %d", m.Compact.Count, m.Flush.Count)
	}

	// Unflushed writes in the WAL, then a checkpoint.
	for i := range 50 {
		if err := db.Set(key(n+i), value(n+i, 2), pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	ckpt := fsys.PathJoin(dir, "checkpoint")
	if err := db.Checkpoint(ckpt); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	for _, d := range []string{dir, ckpt} {
		db, err := pebble.Open(d, pebbleOptions(fsys))
		if err != nil {
			t.Fatalf("reopening %s: %v", d, err)
		}
		checkGen(t, db, n+50, 2, 100)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// quiet is a pebble.Logger that drops Pebble's informational lines, so a
// test's output shows only what failed.
type quiet struct{}

func (quiet) Infof(string, ...any)         {}
func (quiet) Errorf(string, ...any)        {}
func (quiet) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }
