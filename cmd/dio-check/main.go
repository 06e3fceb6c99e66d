// Command dio-check probes directories for direct I/O and benchmarks
// std-fs against direct I/O on them.
//
// Usage:
//
//	dio-check [probe] [-json] [-require direct] DIR...
//	dio-check bench [-buffers 8KiB,64KiB] [-depth 0] [-duration 1s] [-fio=true] [-json] [-runs 1] [-size 128MiB] [-value 100B] [-workload seq-no-delta,seq,read] DIR
//	dio-check pressure [-engines all] [-hot 600MiB] [-json] [-lead 3] [-memory 1GiB] [-plot FILE] [-rounds 1] [-seconds 10] [-shape append] [-throttle RATE] [-writers 1] DIR
//	dio-check help [probe | bench | pressure]
//	dio-check -version
//
// The probe is the command run when none is named, and may be named
// (dio-check probe /tmp). A first argument that names nothing and is one
// typo from a command (dio-check bnech /tmp) is refused, with the command
// it meant, rather than probed as a directory.
//
// Flags may come before or after the directories ("--" ends them), and -h
// or -help prints a command's usage and flags, as does help after it
// (dio-check bench help). Sizes are bytes or a number
// with a unit, as go-humanize parses them: KiB, MiB, GiB are powers of 2,
// kB, MB, GB (and k, M, G) powers of 10, so 128MB is 128,000,000 bytes;
// a size must come to a whole number of bytes (1.5KiB, not 1.3KiB).
//
// The probe takes the directories in order, and one it cannot probe
// (missing, not a directory, not writable) stops none of the others: it
// gets its reason on stderr, and under -json an object {"dir", "error"}
// in its place on stdout, and the exit status is 2 once all are done.
// It writes a real temporary file in each directory (created
// exclusively under a random name and removed on every path, including
// SIGINT and SIGTERM) and reports the filesystem, its block device, the
// direct-I/O alignment, whether O_DIRECT, io_uring and RWF_DONTCACHE
// work, and the mode dio would choose: those answers are
// fallback.ProbeFile's, the library's own choice, not a second guess at
// it. The bench reproduces Neon's bench_ingest on DIR, and random blob
// reads; its progress goes to stderr, a live line on a terminal, a line
// per run otherwise. Pressure measures, in a memory cgroup, what each
// engine's ingest does to a co-tenant (a process of its own) reading a
// warm file through the page cache, beside a busy CPU for reference and
// with the CPU time the hypervisor took; it needs root.
//
// Exit status: 0 done (and after -h); 1 a -require was not met; 2 bad
// usage or a directory that cannot be probed (even with a -require unmet);
// 130 on SIGINT and 143 on SIGTERM (128 + the signal, as a shell reports
// it), after removing the temporary files.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

// usageError is a bad command line or an unusable directory: exit 2. A
// bad command line carries its command's synopsis, printed after msg, and
// a hint at how to see the command's flags.
type usageError struct{ msg, synopsis, hint string }

func (e usageError) Error() string { return e.msg }

// badUsage is msg about a command line that fs refused, or that its
// command did.
func badUsage(fs *flag.FlagSet, msg string) usageError {
	return usageError{msg: msg, synopsis: synopsis(fs), hint: helpHint(fs.Name())}
}

// helpHint points at the usage of cmd ("dio-check", "dio-check bench"):
// the probe's help lists the commands, the others' their flags.
func helpHint(cmd string) string {
	if cmd == "dio-check" {
		return "Run 'dio-check help' for the commands and their flags."
	}
	return fmt.Sprintf("Run '%s -h' (or 'dio-check help %s') for its flags.", cmd, strings.TrimPrefix(cmd, "dio-check "))
}

// errRequire is an unmet -require: exit 1.
var errRequire = errors.New("requirement not met")

// errReported is a failure whose reasons were printed already, a
// directory of several that could not be probed: exit 2.
var errReported = errors.New("failed, as printed")

func main() {
	tmp := newTempFiles()
	defer tmp.removeAll()
	// Notify before any work, not in the goroutine: a signal that came
	// before that goroutine ran would kill the process with its files.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go tmp.removeOnSignal(sigs)

	err := run(os.Args[1:], os.Stdout, os.Stderr, tmp)
	var ue usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
	case errors.As(err, &ue):
		fmt.Fprintln(os.Stderr, "dio-check:", err)
		if ue.synopsis != "" {
			fmt.Fprintln(os.Stderr, ue.synopsis)
		}
		if ue.hint != "" {
			fmt.Fprintln(os.Stderr, ue.hint)
		}
		tmp.removeAll()
		os.Exit(2)
	case errors.Is(err, errRequire):
		tmp.removeAll()
		os.Exit(1)
	case errors.Is(err, errReported):
		tmp.removeAll()
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "dio-check:", err)
		tmp.removeAll()
		os.Exit(2)
	}
}

func run(args []string, stdout, stderr io.Writer, tmp *tempFiles) error {
	if len(args) > 0 {
		switch args[0] {
		case "probe":
			return runProbe(args[1:], stdout, stderr, tmp)
		case "bench":
			return runBench(args[1:], stdout, stderr, tmp)
		case "pressure":
			return runPressure(args[1:], stdout, stderr, tmp)
		case "help":
			return help(args[1:], stdout)
		case pressureChildCmd:
			return pressureChild(args[1:], stdout)
		case cotenantCmd:
			return pressureCotenant(args[1:], stdout)
		}
	}
	if len(args) == 1 && (args[0] == "-version" || args[0] == "--version") {
		fmt.Fprintln(stdout, version())
		return nil
	}
	if len(args) > 0 {
		if cmd, ok := misspelt(args[0]); ok {
			return usageError{msg: fmt.Sprintf("unknown command %s; did you mean %s?", args[0], cmd), hint: helpHint("dio-check")}
		}
	}
	return runProbe(args, stdout, stderr, tmp)
}

// help prints the usage of dio-check, or of the command named, on stdout.
func help(args []string, stdout io.Writer) error {
	switch {
	case len(args) == 0:
		usage(stdout)
	case len(args) == 1 && args[0] == "probe":
		usage(stdout)
	case len(args) == 1 && args[0] == "bench":
		fs, _ := benchFlags()
		printFlags(stdout, fs)
	case len(args) == 1 && args[0] == "pressure":
		fs, _ := pressureFlags()
		printFlags(stdout, fs)
	default:
		return usageError{msg: fmt.Sprintf("help %s: the commands are probe, bench and pressure", strings.Join(args, " ")),
			synopsis: "usage: dio-check help [probe | bench | pressure]", hint: helpHint("dio-check")}
	}
	return errHelp
}

// usage prints every command's synopsis, the probe's flags, and what holds
// for all of them.
func usage(w io.Writer) {
	probe, _ := probeFlags()
	bench, _ := benchFlags()
	pressure, _ := pressureFlags()
	fmt.Fprintln(w, "dio-check probes directories for direct I/O, benchmarks std-fs against direct I/O on one (bench),")
	fmt.Fprintln(w, "and measures what an ingest does to a co-tenant under memory pressure (pressure, as root).")
	fmt.Fprintln(w)
	fmt.Fprintln(w, synopsis(probe))
	for _, fs := range []*flag.FlagSet{bench, pressure} {
		fmt.Fprintln(w, "      "+strings.TrimPrefix(synopsis(fs), "usage:"))
	}
	fmt.Fprintln(w, "       dio-check help [probe | bench | pressure]")
	fmt.Fprintln(w, "       dio-check -version")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "The probe's flags:")
	probe.SetOutput(w)
	probe.PrintDefaults()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Flags may come before or after the directories (\"--\" ends them); -h, or help after a command")
	fmt.Fprintln(w, "(dio-check bench help), shows its flags.")
	fmt.Fprintln(w, "Sizes: "+sizeHelp+".")
	fmt.Fprintln(w, "Exit status: 0 done; 1 a -require was not met; 2 bad usage or a directory that cannot be probed;")
	fmt.Fprintln(w, "130 on SIGINT, 143 on SIGTERM, after removing the temporary files.")
}

// tempFiles tracks the files dio-check made and the programs it runs, so
// that every exit path, including a signal, removes the files. Files are
// created and removed under its lock, which a signal's cleanup takes and
// keeps until the process exits: nothing is created after that cleanup.
type tempFiles struct {
	mu       sync.Mutex
	paths    map[string]struct{}
	removers map[string]func() // how the paths that are not files or directories go (a cgroup)
	procs    map[*os.Process]struct{}
}

func newTempFiles() *tempFiles {
	return &tempFiles{paths: map[string]struct{}{}, removers: map[string]func(){}, procs: map[*os.Process]struct{}{}}
}

// makeNewFunc tracks path, and calls mk, which makes what rm removes (a
// cgroup, whose removal waits for its tasks to leave; a loop device), all
// under the lock, so that a signal's cleanup finds either nothing or both
// the path and rm. What mk failed to make is forgotten, not removed: it
// may not be ours, and mk cleans up after itself.
func (t *tempFiles) makeNewFunc(path string, mk func() error, rm func()) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.paths[path] = struct{}{}
	if err := mk(); err != nil {
		delete(t.paths, path)
		return err
	}
	t.removers[path] = rm
	return nil
}

// removeLocked removes path, tracked, with t.mu held.
func (t *tempFiles) removeLocked(path string) {
	if rm, ok := t.removers[path]; ok {
		rm()
		delete(t.removers, path)
	} else {
		os.RemoveAll(path)
	}
	delete(t.paths, path)
}

// MakeTemp calls mk, which makes a file or directory under a name of its
// choosing (os.CreateTemp, os.MkdirTemp) and returns its path, and tracks
// that path, both under the lock: a signal's cleanup comes before mk or
// after the path is tracked. A path mk returns with an error is tracked
// too (a file created, then failing to close, is still there to remove).
// It implements ingest.Tracker.
func (t *tempFiles) MakeTemp(mk func() (string, error)) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	path, err := mk()
	if path != "" {
		t.paths[path] = struct{}{}
	}
	return path, err
}

// mkdirTemp makes and tracks a new directory in dir whose name starts
// with prefix.
func (t *tempFiles) mkdirTemp(dir, prefix string) (string, error) {
	return t.MakeTemp(func() (string, error) { return os.MkdirTemp(dir, prefix) })
}

// Remove removes path and forgets it; it implements ingest.Tracker.
func (t *tempFiles) Remove(path string) { t.remove(path) }

func (t *tempFiles) remove(path string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.removeLocked(path)
}

func (t *tempFiles) removeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for p := range t.paths {
		t.removeLocked(p)
	}
}

// start starts cmd and tracks its process, under the lock, so that a
// signal's cleanup kills it before it removes the files it may write.
func (t *tempFiles) start(cmd *exec.Cmd) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	t.procs[cmd.Process] = struct{}{}
	return nil
}

// run starts cmd as start does and waits for it.
func (t *tempFiles) run(cmd *exec.Cmd) error {
	if err := t.start(cmd); err != nil {
		return err
	}
	return t.wait(cmd)
}

// wait waits for cmd, started with start, and forgets its process.
func (t *tempFiles) wait(cmd *exec.Cmd) error {
	err := cmd.Wait()
	t.mu.Lock()
	delete(t.procs, cmd.Process)
	t.mu.Unlock()
	return err
}

// removeOnSignal waits for a signal on sigs, removes the files and exits
// with 128+signal, as a shell reports a process killed by it.
func (t *tempFiles) removeOnSignal(sigs <-chan os.Signal) {
	s := <-sigs
	// Hold the lock to the end, so that nothing is created or started
	// after the cleanup and before the exit.
	t.mu.Lock()
	for p := range t.procs {
		kids := killTree(p)
		waitDead(p.Pid)
		for _, pid := range kids {
			waitDead(pid)
		}
	}
	for p := range t.paths {
		t.removeLocked(p)
	}
	fmt.Fprintf(os.Stderr, "dio-check: %v: removed temporary files\n", s)
	os.Exit(128 + int(s.(syscall.Signal)))
}

// waitDead waits up to a second for the process pid to be dead (a zombie
// or gone), without reaping it: its waiter may be another goroutine.
func waitDead(pid int) {
	for range 100 {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		// The state follows the command name in parentheses.
		if i := bytes.LastIndexByte(stat, ')'); err != nil || i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
