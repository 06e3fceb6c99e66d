//go:build linux

package crashtest_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/dio-storage/dio/crashtest"
)

// run runs c and returns its report, skipping the test where the machine
// cannot run the harness (failing instead under CI=true, where it must).
func run(t *testing.T, c crashtest.Config) *crashtest.Report {
	t.Helper()
	if err := crashtest.Available(c.FS); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true, but: %v", err)
		}
		t.Skip(err)
	}
	rep, err := crashtest.Run(context.Background(), c)
	if errors.Is(err, crashtest.ErrUnavailable) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep)
	return rep
}

// RoundsEnv repeats each test's run with a new recording (and seed), for
// long runs: each recording's timing differs, and so do its states.
const RoundsEnv = "DIO_CRASH_ROUNDS"

func rounds(t *testing.T) int {
	v := os.Getenv(RoundsEnv)
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number", RoundsEnv, v)
	}
	return n
}

// mustPass runs c (DIO_CRASH_ROUNDS times) and fails the test with every
// failing state.
func mustPass(t *testing.T, c crashtest.Config) {
	t.Helper()
	for range rounds(t) {
		mustPassOnce(t, c)
	}
}

func mustPassOnce(t *testing.T, c crashtest.Config) {
	t.Helper()
	rep := run(t, c)
	if err := rep.Err(); err != nil {
		t.Fatalf("%d of %d crash states failed (seed %d):\n%v", rep.FailedStates, rep.States, rep.Seed, err)
	}
	if rep.States < rep.Requested {
		t.Errorf("the recording gave %d distinct crash states, %d were asked for: make the workload write more between its flushes", rep.States, rep.Requested)
	}
}

// stream returns n bytes of the stream seed names: the data a workload
// writes and its checker expects.
func stream(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 0x73747265616d))
	p := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := r.Uint64()
		for k := 0; k < 8 && i+k < n; k++ {
			p[i+k] = byte(v >> (8 * k))
		}
	}
	return p
}

var filesystems = []crashtest.FS{crashtest.Ext4, crashtest.XFS}

// TestInvalidConfig: what cannot make a run says so before anything is
// made, as an error matching ErrInvalidConfig.
func TestInvalidConfig(t *testing.T) {
	ok := func(context.Context, *crashtest.Recorder) error { return nil }
	check := func(context.Context, *crashtest.State) error { return nil }
	for name, c := range map[string]crashtest.Config{
		"no check":      {FS: crashtest.Ext4, Workload: ok},
		"no workload":   {FS: crashtest.Ext4, Check: check},
		"unknown fs":    {FS: "btrfs", Workload: ok, Check: check},
		"odd disk size": {FS: crashtest.Ext4, Workload: ok, Check: check, DiskSize: 1000},
	} {
		if _, err := crashtest.Run(context.Background(), c); !errors.Is(err, crashtest.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
	t.Setenv(crashtest.StatesEnv, "many")
	if _, err := crashtest.Run(context.Background(), crashtest.Config{FS: crashtest.Ext4, Workload: ok, Check: check}); !errors.Is(err, crashtest.ErrInvalidConfig) {
		t.Errorf("%s=many: %v, want ErrInvalidConfig", crashtest.StatesEnv, err)
	}
}
