package testenv

import (
	"runtime"
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
