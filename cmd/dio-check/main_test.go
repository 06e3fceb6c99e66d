package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/cmd/dio-check/internal/ingest"
	"github.com/dio-storage/dio/internal/testenv"
)

var binary string // built once by TestMain

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dio-check-bin-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "dio-check")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		panic(string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// dioCheck runs the binary and returns stdout, stderr and the exit code.
func dioCheck(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return stdout.String(), stderr.String(), code
}

func TestProbeJSON(t *testing.T) {
	dir := testenv.Dir(t)
	keep := filepath.Join(dir, "existing")
	require.NoError(t, os.WriteFile(keep, []byte("untouched"), 0o644))
	out, stderr, code := dioCheck(t, "-json", dir)
	require.Equal(t, 0, code, stderr)
	var p map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &p), out)
	for _, k := range []string{"dir", "fs", "o_direct", "mem_align", "offset_align", "atomic_write_min", "atomic_write_max", "io_uring", "dontcache", "mode", "reason"} {
		assert.Contains(t, p, k)
	}
	assert.Equal(t, dir, p["dir"])
	if fs := testenv.FS(); fs != "" {
		assert.Equal(t, fs, p["fs"])
	}
	assert.Contains(t, []any{"direct+io_uring", "direct+pwrite", "std-fs+dontcache", "std-fs"}, p["mode"])
	assert.NotEmpty(t, p["reason"])
	if p["o_direct"] == false {
		// Without O_DIRECT, Auto takes uncached writes where they work.
		want := "std-fs"
		if p["dontcache"] == true {
			want = "std-fs+dontcache"
		}
		assert.Equal(t, want, p["mode"])
	}
	// Untorn writes: xfs with reflink has them, tmpfs and ext4 here none.
	switch testenv.FS() {
	case "xfs":
		assert.EqualValues(t, 4096, p["atomic_write_min"])
		assert.Greater(t, p["atomic_write_max"], 4095.0)
	case "", "tmpfs", "ext4", "ramfs":
		assert.EqualValues(t, 0, p["atomic_write_max"])
	}
	switch {
	case testenv.RejectsDirect():
		assert.Equal(t, false, p["o_direct"])
		assert.Equal(t, "std-fs", p["mode"])
		assert.Contains(t, p["reason"], "rejected O_DIRECT")
	case testenv.Sector() > 0:
		assert.Equal(t, true, p["o_direct"])
		assert.EqualValues(t, testenv.Sector(), p["offset_align"])
		assert.EqualValues(t, testenv.Sector(), p["min_write_align"], "the kernel refuses writes below the sector size")
	}
	data, err := os.ReadFile(keep)
	require.NoError(t, err)
	assert.Equal(t, "untouched", string(data))
	require.NoError(t, os.Remove(keep))
	testenv.RequireEmpty(t, dir)
}

func TestProbeTable(t *testing.T) {
	dir := testenv.Dir(t)
	out, stderr, code := dioCheck(t, dir, dir)
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.GreaterOrEqual(t, len(lines), 3)
	assert.True(t, strings.HasPrefix(lines[0], "DIR"), out)
	assert.Contains(t, lines[1], dir)
	testenv.RequireEmpty(t, dir)
}

func TestExitCodes(t *testing.T) {
	dir := testenv.Dir(t)
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"missing", []string{filepath.Join(dir, "missing")}, 2, "no such file or directory"},
		{"not a directory", []string{file}, 2, "not a directory"},
		{"no directory", nil, 2, "no directory given"},
		{"bad flag", []string{"-nope", dir}, 2, "flag provided but not defined"},
		{"bad require", []string{"-require", "magic", dir}, 2, "only \"direct\""},
		{"bench without dir", []string{"bench"}, 2, "exactly one directory"},
		{"bench bad size", []string{"bench", "-size", "lots", dir}, 2, "-size"},
		{"bench bad buffers", []string{"bench", "-buffers", "1000", dir}, 2, "-buffers"},
		{"bench bad workload", []string{"bench", "-workload", "seq,write", dir}, 2, `-workload: "write"`},
		{"bench bad duration", []string{"bench", "-duration", "0s", dir}, 2, "-duration"},
	}
	for _, c := range cases {
		_, stderr, code := dioCheck(t, c.args...)
		assert.Equal(t, c.code, code, c.name)
		assert.Contains(t, stderr, c.msg, c.name)
	}
	// The errors that are not usage come out as one line.
	_, stderr, _ := dioCheck(t, filepath.Join(dir, "missing"))
	assert.Equal(t, 1, strings.Count(stderr, "\n"), stderr)

	_, stderr, code := dioCheck(t, "-require", "direct", dir)
	if testenv.RejectsDirect() {
		assert.Equal(t, 1, code)
		assert.Contains(t, stderr, "would not get O_DIRECT")
	} else {
		assert.Equal(t, 0, code, stderr)
	}
	require.NoError(t, os.Remove(file))
	testenv.RequireEmpty(t, dir)
}

func TestBenchJSON(t *testing.T) {
	dir := testenv.Dir(t)
	out, stderr, code := dioCheck(t, "bench", "-json", "-workload", "seq-no-delta,seq", "-size", "8MiB", dir)
	require.Equal(t, 0, code, stderr)
	seen := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var r BenchResult
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), sc.Text())
		if r.Engine == fioEngine {
			assert.Equal(t, ingest.SeqNoDelta, r.Workload, "fio is the reference for the pure write workload")
			assert.Positive(t, r.MiBs)
			continue
		}
		assert.Equal(t, 100, r.ValueSize)
		assert.Equal(t, int64(8<<20), r.Bytes)
		assert.Positive(t, r.MiBs)
		seen[r.Workload+"/"+sizeName(int64(r.Buffer))+"/"+r.Engine] = true
	}
	for _, e := range ingest.Engines() {
		skipped := strings.Contains(stderr, "skipped "+e.Name+":")
		switch {
		case strings.HasPrefix(e.Name, "std-fs"):
			assert.False(t, skipped, "std-fs engines always run")
		case testenv.RejectsDirect():
			assert.True(t, skipped, "%s must be skipped, and say so, where O_DIRECT is refused", e.Name)
		case e.Name == "direct+pwrite":
			assert.False(t, skipped, stderr)
		}
		for _, w := range ingest.Workloads() {
			for _, buf := range []string{"8KiB", "64KiB"} {
				assert.Equal(t, !skipped, seen[w+"/"+buf+"/"+e.Name], "row %s/%s/%s (stderr: %s)", w, buf, e.Name, stderr)
			}
		}
	}
	testenv.RequireEmpty(t, dir)
}

func TestBenchTable(t *testing.T) {
	dir := testenv.Dir(t)
	out, stderr, code := dioCheck(t, "bench", "-workload", "seq-no-delta,seq", "-size", "4MiB", "-buffers", "64KiB", dir)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "× std-fs+fsync")
	assert.Contains(t, out, "seq-no-delta")
	assert.Contains(t, out, "In Neon's layout")
	assert.Regexp(t, `64KiB +\d+ +(\d+ \(\d\.\d\d\)|-) +\d+ +(\d+ \(\d\.\d\d\)|-)`, out, "a row in Neon's layout")
	if haveFio() && !testenv.RejectsDirect() {
		assert.Contains(t, out, fioEngine, "the fio reference row")
	}
	testenv.RequireEmpty(t, dir)
}

// TestInterruptRemovesFiles stops a bench with SIGINT and SIGTERM while its
// blob file exists and checks that nothing is left in the directory.
func TestInterruptRemovesFiles(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		dir := testenv.Dir(t)
		interruptBench(t, dir, sig, "", 30*time.Second, 0, "-workload", "seq-no-delta,seq", "-size", "16MiB", "-buffers", "8KiB", "-runs", "100")
	}
}

// TestInterruptDuringFio stops a bench with SIGINT while fio writes its
// reference file: fio is killed and its directory removed.
func TestInterruptDuringFio(t *testing.T) {
	if !haveFio() || testenv.RejectsDirect() {
		t.Skip("needs fio and O_DIRECT")
	}
	dir := testenv.Dir(t)
	// Wait 20 ms after the directory appears, to let fio start writing.
	interruptBench(t, dir, syscall.SIGINT, ".dio-check-fio-", 60*time.Second, 20*time.Millisecond, "-workload", "seq-no-delta", "-size", "64MiB", "-buffers", "64KiB", "-runs", "100")
	out, _ := exec.Command("pgrep", "-f", "fio.*"+dir).Output()
	assert.Empty(t, strings.TrimSpace(string(out)), "fio outlived the bench")
}

// interruptBench runs dio-check bench with args on dir, sends sig once an
// entry named with prefix appears there (within the time given) and after
// settle more, and checks that the bench exits as killed by sig and leaves
// dir empty.
func interruptBench(t *testing.T, dir string, sig syscall.Signal, prefix string, within, settle time.Duration, args ...string) {
	t.Helper()
	created := func() bool {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), prefix) {
				return true
			}
		}
		return false
	}
	interruptBenchWhen(t, dir, sig, created, fmt.Sprintf("a file named %q...", prefix), within, settle, args...)
}

// interruptBenchWhen is interruptBench that waits for ready, which checks
// for what want describes, instead of a file.
func interruptBenchWhen(t *testing.T, dir string, sig syscall.Signal, ready func() bool, want string, within, settle time.Duration, args ...string) {
	t.Helper()
	cmd := exec.Command(binary, append(append([]string{"bench"}, args...), dir)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	seen := false
	for deadline := time.Now().Add(within); !seen && time.Now().Before(deadline); {
		seen = ready()
		time.Sleep(time.Millisecond)
	}
	if !seen {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the bench never made %s (stderr: %s)", want, stderr.String())
	}
	time.Sleep(settle)
	require.NoError(t, cmd.Process.Signal(sig))
	err := cmd.Wait()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "%v", err)
	assert.Equal(t, 128+int(sig), ee.ExitCode(), stderr.String())
	testenv.RequireEmpty(t, dir)
}
