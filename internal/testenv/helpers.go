package testenv

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dio-storage/dio/fallback"
)

// Policies returns the I/O policies worth testing on the filesystem under
// test: DirectPwrite only where O_DIRECT is accepted. DontCache runs
// everywhere: where the filesystem refuses RWF_DONTCACHE it is StdFS,
// which the suites must then pass as well.
func Policies() []fallback.Policy {
	if RejectsDirect() {
		return []fallback.Policy{fallback.Auto, fallback.StdFS, fallback.DontCache}
	}
	return []fallback.Policy{fallback.Auto, fallback.DirectPwrite, fallback.StdFS, fallback.DontCache}
}

// WaitGoroutines waits up to five seconds for the goroutine count to fall
// back to n, and fails t if it does not: a leak check that tolerates
// goroutines still on their way out.
func WaitGoroutines(t testing.TB, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > n && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := runtime.NumGoroutine(); got > n {
		t.Errorf("goroutines leaked: %d, want at most %d", got, n)
	}
}

// OpenFDs counts the process's open descriptors but its io_uring rings,
// which direct shares among all files and keeps for the life of the
// process, setting up more as queues run side by side; -1 where
// /proc/self/fd does not list them.
func OpenFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err != nil || l != "anon_inode:[io_uring]" {
			n++
		}
	}
	return n
}

// Collected runs the garbage collector until done reports true, for at
// most five seconds (a cleanup runs on its own goroutine after the cycle
// that finds its object unreachable), and returns done's last answer.
func Collected(done func() bool) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		runtime.GC()
		if done() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return done()
}

// RequireEmpty fails t at once, naming what is there, unless dir holds
// nothing: what a test checks after code that must leave no file behind.
func RequireEmpty(t testing.TB, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) > 0 {
		names := make([]string, len(ents))
		for i, e := range ents {
			names[i] = e.Name()
		}
		t.Fatalf("%s holds %s, want nothing left there", dir, strings.Join(names, ", "))
	}
}
