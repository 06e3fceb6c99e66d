//go:build unix

package pebblefs

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/metamorphic"
	"github.com/dio-storage/dio/internal/testenv"
)

// The environment variables that size the metamorphic test. CI runs a few
// seeds on every filesystem of the matrix; PEBBLEFS_METAMORPHIC_SEEDS=200
// runs hundreds.
const (
	seedsEnv = "PEBBLEFS_METAMORPHIC_SEEDS" // seeds to run (default 3, 2 with -short)
	seedEnv  = "PEBBLEFS_METAMORPHIC_SEED"  // the first seed (default: from the clock, logged)
	opsEnv   = "PEBBLEFS_METAMORPHIC_OPS"   // operations per seed (default 2000)
)

func envInt(t *testing.T, name string, def uint64) uint64 {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return n
}

// fsOption is the metamorphic test's CustomOption that puts the store on
// pebblefs.
type fsOption struct{ fs *FS }

func (o fsOption) Name() string                    { return "pebblefs" }
func (o fsOption) Value() string                   { return "true" }
func (o fsOption) Close(*pebble.Options) error     { return nil }
func (o fsOption) Open(opts *pebble.Options) error { opts.FS = o.fs; return nil }

// TestMetamorphic runs Pebble's own metamorphic test on pebblefs: random
// options and a random sequence of operations (writes, batches,
// iterators, snapshots, flushes, compactions, ingestions, checkpoints,
// excises), once on Pebble's in-memory MemFS and once on pebblefs, and
// requires the two histories, every operation's result, to be the same.
// Every other seed runs pebblefs with fresh files of a few chunks, so
// that they are evicted and filled again as Pebble reads.
func TestMetamorphic(t *testing.T) {
	seeds := envInt(t, seedsEnv, 3)
	if testing.Short() && os.Getenv(seedsEnv) == "" {
		seeds = 2 // one of each budget
	}
	first := envInt(t, seedEnv, uint64(time.Now().UnixNano()))
	nOps := envInt(t, opsEnv, 2000)
	t.Logf("%s=%d %s=%d %s=%d", seedEnv, first, seedsEnv, seeds, opsEnv, nOps)
	for i := range seeds {
		seed := first + i
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			dir := testenv.Dir(t)
			mem := runMetamorphic(t, seed, nOps, filepath.Join(dir, "db"), filepath.Join(dir, "mem.history"), nil)
			var o *Options
			if i%2 == 1 { // fresh files of a few chunks (see above)
				o = &Options{FreshFiles: 4 * freshChunk}
			}
			fsys := newFS(o)
			onDio := runMetamorphic(t, seed, nOps, filepath.Join(dir, "db"), filepath.Join(dir, "pebblefs.history"), fsys)
			st := fsys.Stats()
			t.Logf("pebblefs read %d times from the device, %d from fresh files", st.Read.Reads, st.FreshReads)
			fsys.live.mu.Lock()
			n := len(fsys.live.files)
			fsys.live.mu.Unlock()
			if n != 0 {
				t.Errorf("%d files still open for writing after the test closed the store", n)
			}
			if i, diff := metamorphic.CompareHistories(t, []string{mem, onDio}); i != 0 {
				t.Fatalf("seed %d: pebblefs's history differs from MemFS's:\n%s", seed, diff)
			}
		})
	}
}

// runMetamorphic runs seed's operations with seed's options, on MemFS
// when fsys is nil, and returns the history's path.
func runMetamorphic(t *testing.T, seed, nOps uint64, dir, history string, fsys *FS) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(0, seed))
	kf := metamorphic.TestkeysKeyFormat
	if seed%2 == 1 {
		kf = metamorphic.CockroachKeyFormat
	}
	opts := metamorphic.RandomOptions(rng, kf, metamorphic.RandomOptionsCfg{
		// Remote storage lives in Pebble's own in-memory objects, and WAL
		// failover writes to a second FS: both would leave pebblefs.
		NoRemoteStorage: true,
		NoWALFailover:   true,
	})
	// A restart reverts MemFS to its synced state, which needs MemFS.
	cfg := metamorphic.DefaultOpConfig().WithOpWeight(metamorphic.OpDBRestart, 0)
	ops := metamorphic.GenerateOps(rng, nOps, kf, cfg)
	if fsys != nil {
		opts.CustomOpts = append(opts.CustomOpts, fsOption{fs: fsys})
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	}
	w, err := os.Create(history)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	test, err := metamorphic.New(ops, opts, dir, w)
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	if err := metamorphic.Execute(test); err != nil {
		t.Fatalf("seed %d: %v (history in %s)", seed, err, history)
	}
	return history
}
