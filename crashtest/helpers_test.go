//go:build linux

package crashtest_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
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

// mustPass runs c and fails the test with every failing state.
func mustPass(t *testing.T, c crashtest.Config) *crashtest.Report {
	t.Helper()
	rep := run(t, c)
	if err := rep.Err(); err != nil {
		t.Fatalf("%d of %d crash states failed (seed %d):\n%v", rep.FailedStates, rep.States, rep.Seed, err)
	}
	if rep.States < rep.Requested {
		t.Errorf("the recording gave %d distinct crash states, %d were asked for: make the workload write more between its flushes", rep.States, rep.Requested)
	}
	return rep
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
