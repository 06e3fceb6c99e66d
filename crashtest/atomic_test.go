//go:build linux

package crashtest_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/crashtest"
	"github.com/dio-storage/dio/direct"
)

// overwrites is the untorn-write workload: a file of units rewritten in
// place, a few units a round, each round fdatasynced and marked. Each
// 8-byte word of a unit names the unit, its version and the word's place,
// so a checker tells a unit that is one version whole from a mix.
type overwrites struct {
	units, unit, rounds int
	plain               bool // WriteAt instead of WriteAtomicAt

	versions [][]uint32 // after each round, each unit's version

	mu    sync.Mutex
	torn  int // units found mixed, over the states
	limit direct.AtomicLimits
}

const overwriteName = "pages"

func unitBytes(p []byte, u int, v uint32) {
	for k := 0; k < len(p); k += 8 {
		binary.LittleEndian.PutUint64(p[k:], uint64(u)<<44|uint64(v)<<20|uint64(k/8))
	}
}

func (w *overwrites) workload(ctx context.Context, r *crashtest.Recorder) error {
	w.versions = nil
	rng := rand.New(rand.NewPCG(r.Seed, 4))
	f, err := direct.Open(filepath.Join(r.Dir, overwriteName), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	w.limit = f.AtomicWrite()
	if !w.plain && (w.limit.Min > w.unit || w.limit.Max < w.unit) {
		return fmt.Errorf("%w: untorn writes of %d bytes on %s: the file's unit is %+v", errors.ErrUnsupported, w.unit, r.FS, w.limit)
	}
	buf, err := aligned.New(w.unit, f.Alignment().Memory)
	if err != nil {
		return err
	}
	defer buf.Free()
	cur := make([]uint32, w.units)
	for u := range w.units {
		unitBytes(buf.Bytes(), u, 0)
		if _, err := f.WriteAt(buf.Bytes(), int64(u*w.unit)); err != nil {
			return err
		}
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := syncDir(r.Dir); err != nil {
		return err
	}
	w.versions = append(w.versions, append([]uint32(nil), cur...))
	r.Mark(binary.AppendUvarint(nil, 0))
	for round := 1; round <= w.rounds; round++ {
		for range 1 + rng.IntN(4) {
			u := rng.IntN(w.units)
			cur[u]++
			unitBytes(buf.Bytes(), u, cur[u])
			if w.plain {
				_, err = f.WriteAt(buf.Bytes(), int64(u*w.unit))
			} else {
				_, err = f.WriteAtomicAt(buf.Bytes(), int64(u*w.unit))
			}
			if err != nil {
				return err
			}
		}
		if err := f.Sync(); err != nil {
			return err
		}
		w.versions = append(w.versions, append([]uint32(nil), cur...))
		r.Mark(binary.AppendUvarint(nil, uint64(round)))
	}
	return nil
}

// check wants each unit whole (one version in every word) at a version
// from the last acknowledged round's to the last written.
func (w *overwrites) check(ctx context.Context, s *crashtest.State) error {
	if len(s.Marks) == 0 {
		return nil
	}
	round, _ := binary.Uvarint(s.Last())
	acked, last := w.versions[round], w.versions[len(w.versions)-1]
	f, err := direct.Open(filepath.Join(s.Dir, overwriteName), os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("round %d acknowledged: %w", round, err)
	}
	defer f.Close()
	buf, err := aligned.New(w.unit, f.Alignment().Memory)
	if err != nil {
		return err
	}
	defer buf.Free()
	p := buf.Bytes()
	for u := range w.units {
		if _, err := f.ReadAt(p, int64(u*w.unit)); err != nil {
			return fmt.Errorf("unit %d: %w", u, err)
		}
		first := binary.LittleEndian.Uint64(p)
		v := uint32(first >> 20 & 0xffffff)
		for k := 0; k < len(p); k += 8 {
			x := binary.LittleEndian.Uint64(p[k:])
			if x != uint64(u)<<44|uint64(v)<<20|uint64(k/8) {
				w.mu.Lock()
				w.torn++
				w.mu.Unlock()
				return fmt.Errorf("unit %d (bytes %d-%d) torn: version %d at its start, word %#x at byte %d (round %d acknowledged)", u, u*w.unit, (u+1)*w.unit, v, x, k, round)
			}
		}
		if v < acked[u] || v > last[u] {
			return fmt.Errorf("unit %d holds version %d, acknowledged %d in round %d (last written %d)", u, v, acked[u], round, last[u])
		}
	}
	// The file takes the next overwrite.
	unitBytes(p, 0, last[0]+1)
	if _, err := f.WriteAt(p, 0); err != nil {
		return err
	}
	return f.Sync()
}

const atomicUnit = 16 << 10

func TestAtomicOverwrite(t *testing.T) {
	w := &overwrites{units: 64, unit: atomicUnit, rounds: 200}
	c := crashtest.Config{FS: crashtest.XFS, Workload: w.workload, Check: w.check, KeepFailed: os.Getenv("DIO_CRASH_KEEP")}
	if err := crashtest.Available(c.FS); err != nil {
		run(t, c) // skips, or fails under CI
	}
	for range rounds(t) {
		rep, err := crashtest.Run(context.Background(), c)
		if errors.Is(err, errors.ErrUnsupported) {
			t.Skip(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Log(rep)
		t.Logf("untorn unit %+v", w.limit)
		if err := rep.Err(); err != nil {
			t.Fatalf("%d of %d crash states failed (seed %d):\n%v", rep.FailedStates, rep.States, rep.Seed, err)
		}
	}
}

// TestDefectPlainOverwrite checks the same stream written with plain
// WriteAt as if it were untorn: the harness must find a torn unit. (That
// a plain overwrite tears is what makes the untorn test above mean
// anything: its states would show a tear if WriteAtomicAt did not hold.)
func TestDefectPlainOverwrite(t *testing.T) {
	for _, f := range filesystems {
		t.Run(string(f), func(t *testing.T) {
			w := &overwrites{units: 64, unit: atomicUnit, rounds: 200, plain: true}
			mustCatch(t, crashtest.Config{FS: f, Workload: w.workload, Check: w.check, MaxFailures: 1})
			t.Logf("%d torn units found", w.torn)
		})
	}
}
