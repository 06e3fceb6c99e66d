//go:build linux

package crashtest_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/dio-storage/dio/crashtest"
	"github.com/dio-storage/dio/pebblefs"
)

// pebbleBatches is the Pebble workload: goroutines committing batches with
// pebble.Sync on pebblefs, small memtables so that flushes and compactions
// run beside them; a batch is marked once its Commit returned.
type pebbleBatches struct {
	writers, batches, keys int

	mu      sync.Mutex
	written map[string][]byte
	metrics string // the recording's flushes and compactions
}

func pebbleOptions() *pebble.Options {
	o := &pebble.Options{
		FS:                    pebblefs.New(nil),
		Logger:                quiet{},
		MemTableSize:          64 << 10,
		L0CompactionThreshold: 2,
	}
	o.TargetFileSizes[0] = 32 << 10
	return o
}

func pebbleKey(g, b, k int) []byte { return fmt.Appendf(nil, "g%d-b%05d-k%02d", g, b, k) }

func pebbleValue(seed uint64, g, b, k int) []byte {
	n := 50 + int((seed+uint64(b*7919+k*104729+g))%1500)
	return bytes.Repeat(fmt.Appendf(nil, "%d.%d.%d|", g, b, k), n/4+1)[:n]
}

func (w *pebbleBatches) workload(ctx context.Context, r *crashtest.Recorder) error {
	db, err := pebble.Open(r.Dir, pebbleOptions())
	if err != nil {
		return err
	}
	w.written = map[string][]byte{}
	var wg sync.WaitGroup
	errs := make([]error, w.writers)
	for g := range w.writers {
		wg.Go(func() {
			for b := range w.batches {
				batch := db.NewBatch()
				for k := range w.keys {
					key, v := pebbleKey(g, b, k), pebbleValue(r.Seed, g, b, k)
					w.mu.Lock()
					w.written[string(key)] = v
					w.mu.Unlock()
					if err := batch.Set(key, v, nil); err != nil {
						errs[g] = err
						return
					}
				}
				if err := batch.Commit(pebble.Sync); err != nil {
					errs[g] = err
					return
				}
				r.Mark(binary.AppendUvarint(binary.AppendUvarint(nil, uint64(g)), uint64(b)))
			}
		})
	}
	wg.Wait()
	m := db.Metrics()
	w.metrics = fmt.Sprintf("the recording ran %d flushes and %d compactions", m.Flush.Count, m.Compact.Count)
	return errors.Join(errors.Join(errs...), db.Close())
}

// check opens Pebble on the crash state: every acknowledged batch is there,
// every key there was written with that value, every batch whole or
// absent; then Pebble takes another synced batch and closes.
func (w *pebbleBatches) check(ctx context.Context, s *crashtest.State) error {
	db, err := pebble.Open(s.Dir, pebbleOptions())
	if err != nil {
		if len(s.Marks) == 0 {
			// Nothing acknowledged, not even a created store:
			// Open may find a half-made one.
			return nil
		}
		return fmt.Errorf("pebble.Open with %d batches acknowledged: %w", len(s.Marks), err)
	}
	if err := w.checkDB(db, s); err != nil {
		db.Close()
		return err
	}
	if err := db.Set([]byte("after"), []byte("the crash"), pebble.Sync); err != nil {
		db.Close()
		return fmt.Errorf("going on: %w", err)
	}
	return db.Close()
}

func (w *pebbleBatches) checkDB(db *pebble.DB, s *crashtest.State) error {
	for _, m := range s.Marks {
		g, n := binary.Uvarint(m)
		b, _ := binary.Uvarint(m[n:])
		for k := range w.keys {
			key := pebbleKey(int(g), int(b), k)
			v, closer, err := db.Get(key)
			if err != nil {
				return fmt.Errorf("acknowledged batch g%d b%d lost: key %s: %w", g, b, key, err)
			}
			ok := bytes.Equal(v, w.written[string(key)])
			closer.Close()
			if !ok {
				return fmt.Errorf("acknowledged batch g%d b%d: key %s has another value", g, b, key)
			}
		}
	}
	it, err := db.NewIter(nil)
	if err != nil {
		return err
	}
	seen := map[string]int{} // batch → keys seen
	for it.First(); it.Valid(); it.Next() {
		key := string(it.Key())
		if want, ok := w.written[key]; !ok || !bytes.Equal(it.Value(), want) {
			it.Close()
			return fmt.Errorf("phantom: key %q (%d bytes) was never written so", key, len(it.Value()))
		}
		seen[key[:len(key)-4]]++
	}
	if err := it.Close(); err != nil {
		return err
	}
	for batch, n := range seen {
		if n != w.keys {
			return fmt.Errorf("batch %s partly there: %d of its %d keys", batch, n, w.keys)
		}
	}
	return nil
}

// quiet is a Pebble logger that says nothing but a fatal error.
type quiet struct{}

func (quiet) Infof(string, ...any)         {}
func (quiet) Errorf(string, ...any)        {}
func (quiet) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }

func TestPebble(t *testing.T) {
	for _, f := range filesystems {
		t.Run(string(f), func(t *testing.T) {
			w := &pebbleBatches{writers: 4, batches: 60, keys: 5}
			mustPass(t, crashtest.Config{FS: f, Workload: w.workload, Check: w.check})
			t.Log(w.metrics)
		})
	}
}
