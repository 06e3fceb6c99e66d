// Command dio-check probes directories for direct I/O and benchmarks
// std-fs against direct I/O on them.
//
// Usage:
//
//	dio-check [-json] [-require direct] DIR...
//	dio-check bench [-json] [-size 128MiB] [-value 100] [-buffers 8KiB,64KiB] [-runs 1] DIR
//
// The probe writes a real temporary file in each directory (created
// exclusively under a random name and removed on every path, including
// SIGINT and SIGTERM) and reports the filesystem, its block device, the
// direct-I/O alignment, whether O_DIRECT and io_uring work, and the mode
// dio would choose. The bench reproduces Neon's bench_ingest on DIR.
//
// Exit status: 0 done; 1 a -require was not met; 2 bad usage or a
// directory that cannot be probed.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// usageError is a bad command line or an unusable directory: exit 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// errRequire is an unmet -require: exit 1.
var errRequire = errors.New("requirement not met")

func main() {
	tmp := newTempFiles()
	defer tmp.removeAll()
	go tmp.removeOnSignal(syscall.SIGINT, syscall.SIGTERM)

	err := run(os.Args[1:], os.Stdout, os.Stderr, tmp)
	var ue usageError
	switch {
	case err == nil:
	case errors.As(err, &ue):
		fmt.Fprintln(os.Stderr, "dio-check:", err)
		tmp.removeAll()
		os.Exit(2)
	case errors.Is(err, errRequire):
		tmp.removeAll()
		os.Exit(1)
	default:
		fmt.Fprintln(os.Stderr, "dio-check:", err)
		tmp.removeAll()
		os.Exit(2)
	}
}

func run(args []string, stdout, stderr io.Writer, tmp *tempFiles) error {
	if len(args) > 0 && args[0] == "bench" {
		return runBench(args[1:], stdout, stderr, tmp)
	}
	return runProbe(args, stdout, stderr, tmp)
}

// tempFiles tracks the files dio-check made, so that every exit path,
// including a signal, removes them.
type tempFiles struct {
	mu    sync.Mutex
	paths map[string]struct{}
}

func newTempFiles() *tempFiles { return &tempFiles{paths: map[string]struct{}{}} }

// Add registers path for removal; it implements ingest.Tracker.
func (t *tempFiles) Add(path string) { t.add(path) }

// Remove removes path and forgets it; it implements ingest.Tracker.
func (t *tempFiles) Remove(path string) { t.remove(path) }

// create creates path, which must not exist, and tracks it, under the lock
// a signal's removal takes: no signal can come between the two.
func (t *tempFiles) create(path string) (*os.File, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		t.paths[path] = struct{}{}
	}
	return f, err
}

func (t *tempFiles) add(path string) {
	t.mu.Lock()
	t.paths[path] = struct{}{}
	t.mu.Unlock()
}

func (t *tempFiles) remove(path string) {
	t.mu.Lock()
	delete(t.paths, path)
	t.mu.Unlock()
	os.Remove(path)
}

func (t *tempFiles) removeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for p := range t.paths {
		os.Remove(p)
		delete(t.paths, p)
	}
}

// removeOnSignal removes the files and exits with 128+signal, as a shell
// reports a process killed by it.
func (t *tempFiles) removeOnSignal(sigs ...os.Signal) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	s := <-ch
	// Hold the lock to the end, so that no file is created (through
	// create) after the removal and before the exit.
	t.mu.Lock()
	for p := range t.paths {
		os.Remove(p)
	}
	fmt.Fprintf(os.Stderr, "dio-check: %v: removed temporary files\n", s)
	os.Exit(128 + int(s.(syscall.Signal)))
}
