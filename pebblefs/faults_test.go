//go:build unix

package pebblefs

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/faults"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestFaultsReachPebble checks that an I/O error under a file reaches the
// vfs.File call that made it, and stays: a failed Sync is never reported
// as a success.
func TestFaultsReachPebble(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rule  faults.Rule
		errno syscall.Errno
	}{
		{"fdatasync EIO", faults.Fail(direct.OpSync, 0, syscall.EIO), syscall.EIO},
		{"write ENOSPC", faults.Fail(direct.OpWrite, 0, syscall.ENOSPC), syscall.ENOSPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := testenv.Dir(t)
			fsys := New(&Options{Faults: faults.NewPlan(tc.rule)})
			f, err := fsys.Create(filepath.Join(dir, "000001.log"), vfs.WriteCategoryUnspecified)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(pattern(7, 5000)); err != nil && !errors.Is(err, tc.errno) {
				t.Fatalf("Write: %v", err)
			}
			for range 2 {
				if err := f.Sync(); !errors.Is(err, tc.errno) {
					t.Fatalf("Sync: %v, want %v", err, tc.errno)
				}
			}
			if err := f.Close(); err == nil {
				t.Fatal("Close after a failed Sync returned nil")
			}
		})
	}
}

// switched is an Injector that injects its Plan's faults once on.
type switched struct {
	on   atomic.Bool
	plan *faults.Plan
}

func (s *switched) Inject(op direct.Op, off int64, n int) (direct.Fault, bool) {
	if !s.on.Load() {
		return direct.Fault{}, false
	}
	return s.plan.Inject(op, off, n)
}

// fatal is a pebble.Logger whose Fatalf panics with a fatalError, for a
// test to recover.
type fatal struct{ quiet }

type fatalError string

func (fatal) Fatalf(f string, args ...any) { panic(fatalError(fmt.Sprintf(f, args...))) }

// TestFaultsPebbleSync runs Pebble until its WAL's fdatasync fails: the
// write that asked for pebble.Sync must not be acknowledged. Pebble
// treats a failed WAL sync as fatal (Fatalf, in the committing
// goroutine), as it must after fsyncgate; the error it names is the EIO
// injected under the file.
func TestFaultsPebbleSync(t *testing.T) {
	dir := testenv.Dir(t)
	inj := &switched{plan: faults.NewPlan(faults.Fail(direct.OpSync, 0, syscall.EIO))}
	opts := pebbleOptions(New(&Options{Faults: inj}))
	opts.Logger = fatal{}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set(key(1), value(1, 0), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	inj.on.Store(true)
	var why any
	func() {
		defer func() { why = recover() }()
		err = db.Set(key(2), value(2, 0), pebble.Sync)
	}()
	msg, ok := why.(fatalError)
	switch {
	case why == nil && err == nil:
		t.Fatal("Set with pebble.Sync succeeded while every fdatasync failed")
	case why == nil && !errors.Is(err, syscall.EIO):
		t.Fatalf("Set with pebble.Sync while fdatasync fails: %v, want EIO", err)
	case why != nil && (!ok || !strings.Contains(string(msg), syscall.EIO.Error())):
		t.Fatalf("Pebble stopped with %v, which does not name EIO", why)
	}
	t.Logf("Pebble refused the write: %v%v", err, why)
	inj.on.Store(false)
	func() {
		defer func() { _ = recover() }()
		_ = db.Close()
	}()
}
