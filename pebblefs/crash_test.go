//go:build unix

package pebblefs

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/dio-storage/dio/internal/testenv"
)

// The crash test's environment: PEBBLEFS_CRASH_KILLS sets how many times
// the writer is killed (default 5, 50 for the target); the other
// two are how the parent tells a child what to do.
const (
	killsEnv      = "PEBBLEFS_CRASH_KILLS"
	crashDirEnv   = "PEBBLEFS_CRASH_DIR"
	crashRoundEnv = "PEBBLEFS_CRASH_ROUND"
)

const (
	crashWriters = 4  // goroutines committing at once, so the WAL group-commits
	crashKeys    = 10 // keys per batch
)

func crashKey(round, g, b, k int) []byte {
	return fmt.Appendf(nil, "r%03d-g%d-b%07d-k%02d", round, g, b, k)
}

// crashValue is 100 B to 4 KiB, so WAL records straddle its 32 KiB
// blocks and dio's buffers at every offset.
func crashValue(round, g, b, k int) []byte {
	n := 100 + (b*7919+k*104729+g)%4000
	v := bytes.Repeat(fmt.Appendf(nil, "%d.%d.%d.%d|", round, g, b, k), n/8+1)
	return v[:n]
}

func crashOptions(fsys *FS) *pebble.Options {
	o := &pebble.Options{FS: fsys, Logger: quiet{}, MemTableSize: 256 << 10, L0CompactionThreshold: 2}
	o.TargetFileSizes[0] = 128 << 10
	return o
}

// TestCrashChild is the writer the crash test kills: it commits batches
// with pebble.Sync and prints each acknowledged one. It does nothing
// unless started by TestCrash.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("started by TestCrash only")
	}
	var round int
	fmt.Sscan(os.Getenv(crashRoundEnv), &round)
	db, err := pebble.Open(dir, crashOptions(newFS(nil)))
	if err != nil {
		fmt.Printf("open: %v\n", err)
		os.Exit(3)
	}
	var mu sync.Mutex // one line at a time on stdout
	var wg sync.WaitGroup
	for g := range crashWriters {
		wg.Go(func() {
			for b := 0; ; b++ {
				batch := db.NewBatch()
				for k := range crashKeys {
					_ = batch.Set(crashKey(round, g, b, k), crashValue(round, g, b, k), nil)
				}
				if err := batch.Commit(pebble.Sync); err != nil {
					fmt.Printf("commit: %v\n", err)
					os.Exit(3)
				}
				mu.Lock()
				fmt.Printf("ack %d %d\n", g, b)
				mu.Unlock()
			}
		})
	}
	wg.Wait() // never: the parent kills the process
}

// TestCrash kills a process writing to Pebble on pebblefs with SIGKILL,
// again and again in the same store, and reopens the store each time:
// Pebble must open without error and hold every batch it acknowledged
// (pebble.Sync) in every round so far.
func TestCrash(t *testing.T) {
	kills := int(envInt(t, killsEnv, 5))
	if testing.Short() && os.Getenv(killsEnv) == "" {
		kills = 2
	}
	dir := testenv.Dir(t)
	acked := make([][crashWriters]int, kills) // per round and writer: batches acknowledged
	for round := range kills {
		acked[round] = writeAndKill(t, dir, round, nil)
		checkAcked(t, dir, acked[:round+1])
		t.Logf("round %d: killed after %v batches; all acknowledged batches there", round, acked[round])
	}
}

// writeAndKill runs TestCrashChild on dir as round, lets it write for a
// random moment once its first batch is acknowledged (into a commit, a
// flush, a compaction, a MANIFEST rotation), calls cut if not nil (a
// power cut: the child's later syncs fail, and it may say so), kills it
// with SIGKILL and returns the batches it acknowledged, per writer.
func writeAndKill(t *testing.T, dir string, round int, cut func()) (acked [crashWriters]int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, fmt.Sprint(crashRoundEnv, "=", round))
	if cut == nil {
		cmd.Stderr = os.Stderr // after a power cut the child dies of its EIOs, loudly
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	first := make(chan struct{})
	done := make(chan []string)
	go func() {
		var other []string
		s := bufio.NewScanner(out)
		for s.Scan() {
			var g, b int
			if _, err := fmt.Sscanf(s.Text(), "ack %d %d", &g, &b); err != nil {
				other = append(other, s.Text())
				continue
			}
			if acked == ([crashWriters]int{}) {
				close(first)
			}
			acked[g] = b + 1
		}
		done <- other
	}()
	select {
	case <-first:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("round %d: no batch acknowledged in 30 s", round)
	}
	time.Sleep(time.Duration(20+rand.IntN(400)) * time.Millisecond)
	if cut != nil {
		cut()
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	other := <-done
	_ = cmd.Wait()
	if len(other) > 0 && cut == nil {
		t.Fatalf("round %d: the writer said %q", round, other)
	}
	return acked
}

// checkAcked reopens the store at dir on pebblefs and checks that every
// batch acknowledged in every round so far is there.
func checkAcked(t *testing.T, dir string, acked [][crashWriters]int) {
	t.Helper()
	round := len(acked) - 1
	db, err := pebble.Open(dir, crashOptions(newFS(nil)))
	if err != nil {
		t.Fatalf("round %d: reopening: %v", round, err)
	}
	lost := 0
	for r := range acked {
		for g := range crashWriters {
			for b := range acked[r][g] {
				for k := range crashKeys {
					v, closer, err := db.Get(crashKey(r, g, b, k))
					if err != nil || !bytes.Equal(v, crashValue(r, g, b, k)) {
						if lost++; lost < 5 {
							t.Errorf("round %d: acknowledged key %s of round %d: %v", round, crashKey(r, g, b, k), r, err)
						}
					}
					if err == nil {
						closer.Close()
					}
				}
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if lost > 0 {
		t.Fatalf("round %d: %d acknowledged keys lost", round, lost)
	}
}
