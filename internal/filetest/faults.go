package filetest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/faults"
	"github.com/dio-storage/dio/internal/testenv"
)

// A Fault is one row of a fault test's table: the rules of its plan, and
// the errno they must surface as, or 0 when the engines are to hide them.
type Fault struct {
	Name  string
	Rules []faults.Rule
	Errno syscall.Errno // 0: transient, nothing may surface
	Kinds []string      // kinds of fault (faults.Plan.Injected) the run must have injected

	// Recovers says the fault ends (its rules fail a few calls, then let
	// every one through): once it surfaced, a Sync must succeed within a
	// few tries, writing goes on, and everything acknowledged, before the
	// fault and after it, reads back after a Close that succeeds.
	Recovers bool
}

// Recovering is the table of faults that pass, as a full disk does once
// space is freed: from the n-th call of each of ops, times calls fail with
// EIO, ENOSPC or EDQUOT, and every later one succeeds.
func Recovering(times int, ops ...direct.Op) []Fault {
	var table []Fault
	for _, errno := range []syscall.Errno{syscall.EIO, syscall.ENOSPC, syscall.EDQUOT} {
		for _, op := range ops {
			for _, n := range []int{0, 3, 17} {
				table = append(table, Fault{
					Name:     fmt.Sprintf("%s/%v/%d+%d", errno, op, n, times),
					Rules:    []faults.Rule{{Op: op, After: n, Times: times, Fault: direct.Fault{Err: errno}}},
					Errno:    errno,
					Recovers: true,
				})
			}
		}
	}
	return table
}

// Failures is the table of lasting faults: the n-th call of each of ops
// fails with EIO or ENOSPC, for n the first call, one of the first few,
// and one with buffers in flight behind it.
func Failures(ops ...direct.Op) []Fault {
	var table []Fault
	for _, errno := range []syscall.Errno{syscall.EIO, syscall.ENOSPC} {
		for _, op := range ops {
			for _, n := range []int{0, 3, 5, 17} {
				table = append(table, Fault{
					Name:  fmt.Sprintf("%s/%v/%d", errno, op, n),
					Rules: []faults.Rule{faults.Fail(op, n, errno)},
					Errno: errno,
				})
			}
		}
	}
	return table
}

// TransientWrites are the faults an engine must hide on writes: n calls
// fail with EINTR, then n with EAGAIN, then n transfer at most 4 KiB, then
// late ones complete 5 ms late.
func TransientWrites(n, late int) []faults.Rule {
	return []faults.Rule{
		faults.Transient(direct.OpWrite, n, syscall.EINTR),
		faults.Transient(direct.OpWrite, n, syscall.EAGAIN),
		faults.Short(direct.OpWrite, n, 4096),
		faults.Late(direct.OpWrite, late, 5*time.Millisecond),
	}
}

// A Writer is one package's writer as a fault test drives it. It keeps
// what it acknowledged, to check in Finish.
type Writer interface {
	// Append appends the i-th piece of test data; an error is the fault
	// surfacing.
	Append(i int) error
	// Sync makes what was appended so far acknowledged, where the
	// package's contract says Append alone does not.
	Sync() error
	// Finish closes the writer, whose Close must report errno (0: no
	// error), and checks that everything acknowledged reads back.
	Finish(t *testing.T, errno syscall.Errno)
}

// FaultTest runs a table of faults against one package's writer, for every
// I/O policy worth testing here, and holds each run to the contract: a
// lasting fault surfaces with its errno and stays (Sync keeps returning
// it), a fault that passes surfaces and
// then costs nothing (Recovers), a transient one never surfaces, what was
// acknowledged reads back, the Pool is back to full, and no goroutine or
// descriptor is left behind.
type FaultTest struct {
	// Open makes the writer under test in dir with policy p and the plan
	// as its Faults, and returns the Pool it draws from (nil: none).
	Open      func(t *testing.T, dir string, p fallback.Policy, plan *faults.Plan) (Writer, *aligned.Pool)
	Appends   int // Appends at most; a lasting fault must surface before
	SyncEvery int // Sync after every this many Appends; 0: never
}

// Run runs every row of table under every policy, each as a subtest named
// policy/row.
func (ft FaultTest) Run(t *testing.T, table []Fault) {
	for _, p := range testenv.Policies() {
		for _, f := range table {
			t.Run(p.String()+"/"+f.Name, func(t *testing.T) { ft.run(t, p, f) })
		}
	}
}

func (ft FaultTest) run(t *testing.T, p fallback.Policy, f Fault) {
	dir := testenv.Dir(t)
	warmUp(t, dir)
	fds, goroutines := testenv.OpenFDs(), runtime.NumGoroutine()
	plan := faults.NewPlan(f.Rules...)
	w, pool := ft.Open(t, dir, p, plan)

	var failure error
	for i := 0; failure == nil && i < ft.Appends; i++ {
		failure = w.Append(i)
		if failure == nil && ft.SyncEvery > 0 && i%ft.SyncEvery == ft.SyncEvery-1 {
			failure = w.Sync()
		}
	}
	switch {
	case f.Errno != 0 && f.Recovers:
		require.Error(t, failure, "the injected fault never surfaced")
		require.ErrorIs(t, failure, f.Errno)
		var err error
		for range 8 {
			if err = w.Sync(); err == nil {
				break
			}
			require.ErrorIs(t, err, f.Errno)
		}
		require.NoError(t, err, "a Sync after the cause is gone succeeds")
		for i := ft.Appends; i < ft.Appends+3*max(ft.SyncEvery, 10); i++ {
			require.NoError(t, w.Append(i), "writing goes on")
		}
		require.NoError(t, w.Sync())
		w.Finish(t, 0)
	case f.Errno != 0:
		require.Error(t, failure, "the injected fault never surfaced")
		require.ErrorIs(t, failure, f.Errno)
		// Append need not fail: it writes again only what waits to be
		// written in full buffers, and a failed fdatasync or padded tail
		// leaves none. Sync must.
		w.Append(ft.Appends)
		assert.ErrorIs(t, w.Sync(), f.Errno, "the error stays for Sync while its cause does")
		assert.NotEmpty(t, plan.Injected())
		w.Finish(t, f.Errno)
	default:
		require.NoError(t, failure, "a transient fault surfaced")
		w.Finish(t, f.Errno)
	}

	if pool != nil {
		assert.Zero(t, pool.Stats().InUse, "buffers leaked")
	}
	got := plan.Injected()
	for _, k := range f.Kinds {
		assert.Positive(t, got[k], "no %s injected", k)
	}
	testenv.WaitGoroutines(t, goroutines)
	assert.LessOrEqual(t, testenv.OpenFDs(), fds, "descriptors leaked") // closed by Close, not by a cleanup
	t.Logf("injected %v", got)
}

// warmUp opens and closes a file in dir, so that descriptors the runtime
// opens once for good (the netpoller's) are open before the count.
func warmUp(t *testing.T, dir string) {
	path := filepath.Join(dir, "warm-up")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, os.Remove(path))
}
