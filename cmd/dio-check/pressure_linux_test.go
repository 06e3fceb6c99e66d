package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/internal/cgroup"
	"github.com/dio-storage/dio/internal/testenv"
)

// pressureRoot skips the test unless a memory cgroup can be made here,
// and returns the hierarchy's root.
func pressureRoot(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("pressure needs root")
	}
	roots, err := cgroup.Discover()
	require.NoError(t, err)
	root, _, err := cgroup.Choose(cgroup.OS{}, roots)
	if err != nil {
		t.Skipf("no memory cgroup: %v", err)
	}
	return root
}

// ownCgroup returns, on v1, the test's own memory cgroup, where pressure
// makes its own; "" on v2, where it may go higher (cgroup.New).
func ownCgroup(t *testing.T) string {
	roots, err := cgroup.Discover()
	require.NoError(t, err)
	if _, v, _ := cgroup.Choose(cgroup.OS{}, roots); v == cgroup.V1 {
		return filepath.Join(roots.V1Memory, filepath.Clean("/"+roots.SelfV1Memory))
	}
	return ""
}

// peakSlack is how far a cgroup's recorded peak may pass its limit: a
// charge batch (MEMCG_CHARGE_BATCH, 64 pages) at most.
const peakSlack = 64 * 4096

var cgroupLine = regexp.MustCompile(`dio-check pressure: cgroup (\S+) \(v[12], `)

// requireNoCgroup fails unless the run whose stderr is given named its
// cgroup, under root (on v1 in the caller's own cgroup), and that cgroup
// is gone.
func requireNoCgroup(t *testing.T, root, stderr string) {
	t.Helper()
	m := cgroupLine.FindStringSubmatch(stderr)
	require.NotNil(t, m, "no cgroup line in %q", stderr)
	assert.True(t, strings.HasPrefix(m[1], root+"/"), "%s not under %s", m[1], root)
	if own := ownCgroup(t); own != "" {
		assert.Equal(t, own, filepath.Dir(m[1]), "not under the caller's own cgroup")
	}
	assert.NoDirExists(t, m[1], "cgroup left behind")
}

// inMemoryFS skips the test where pressure refuses the directory, after
// checking that it does, with exit 2 and the reason.
func inMemoryFS(t *testing.T, dir string) {
	t.Helper()
	if fs := testenv.FS(); fs == "tmpfs" || fs == "ramfs" {
		_, stderr, code := dioCheck(t, "pressure", "-seconds", "1", "-memory", "256MiB", "-hot", "64MiB", dir)
		assert.Equal(t, 2, code)
		assert.Contains(t, stderr, fs+" holds files in memory")
		requireDirError(t, []string{"pressure", "-json", "-seconds", "1", "-memory", "256MiB", "-hot", "32MiB", dir}, dir)
		testenv.RequireEmpty(t, dir)
		t.Skipf("pressure refuses %s", fs)
	}
}

func TestPressureRun(t *testing.T) {
	root := pressureRoot(t)
	dir := testenv.Dir(t)
	inMemoryFS(t, dir)
	plot := filepath.Join(t.TempDir(), "pressure.svg")
	out, stderr, code := dioCheck(t, "pressure", "-json", "-seconds", "1", "-rounds", "2", "-lead", "0", "-memory", "256MiB", "-hot", "64MiB", "-plot", plot, dir)
	require.Equal(t, 0, code, stderr)
	t.Logf("%s%s", out, stderr)

	// The keys the issue lists, and the CPU time the hypervisor stole.
	keys := []string{"engine", "ingest_mib_s", "write_p99_us", "write_max_us", "cotenant_reads_s", "cotenant_p50_us", "cotenant_p99_us", "cotenant_p999_us", "memory_peak_bytes", "cpu_steal_pct"}
	var engines []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var row map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &row), line)
		var got []string
		for k := range row {
			got = append(got, k)
		}
		e := row["engine"].(string)
		want := keys
		if e != alone && e != busyCPU {
			// The ingest's I/O as direct.Stats saw it.
			want = append(slices.Clone(keys), "device_write_p99_us", "write_amp", "sync_p99_us")
			assert.GreaterOrEqual(t, row["write_amp"], 1.0, e)
			assert.Less(t, row["write_amp"], 1.5, e)
			assert.Greater(t, row["device_write_p99_us"], 0.0, e)
			assert.Greater(t, row["sync_p99_us"], 0.0, e)
		}
		assert.ElementsMatch(t, want, got, "exactly these keys")
		steal := row["cpu_steal_pct"].(float64)
		assert.True(t, steal >= 0 && steal <= 100, "steal %v%%", steal)
		engines = append(engines, e)
		assert.Greater(t, row["cotenant_reads_s"], 0.0, e)
		assert.Greater(t, row["cotenant_p99_us"], 0.0, e)
		assert.GreaterOrEqual(t, row["cotenant_p99_us"], row["cotenant_p50_us"], e)
		assert.GreaterOrEqual(t, row["cotenant_p999_us"], row["cotenant_p99_us"], e)
		peak := row["memory_peak_bytes"].(float64)
		// The hot file was charged to the cgroup, and the limit held
		// (measured: v1's max_usage_in_bytes overshoots it by a page
		// now and then, as a charge lands before reclaim catches up).
		assert.Greater(t, peak, float64(64<<20), e)
		assert.LessOrEqual(t, peak, float64(256<<20+peakSlack), e)
		if e == alone || e == busyCPU {
			assert.Zero(t, row["ingest_mib_s"], "%s ingests nothing", e)
			assert.Zero(t, row["write_max_us"], "%s ingests nothing", e)
		} else {
			assert.Greater(t, row["ingest_mib_s"], 0.0, e)
			assert.Greater(t, row["write_max_us"], 0.0, e)
			assert.GreaterOrEqual(t, row["write_max_us"], row["write_p99_us"], e)
		}
	}
	want := []string{alone, busyCPU, "std-fs", "std-fs+dontcache", "direct+pwrite", "direct+io_uring"}
	switch testenv.FS() {
	case "ext4", "xfs", "":
		if testenv.FS() == "" && !slices.Equal(want, engines) {
			t.Logf("not every engine runs here: %v", engines)
			break
		}
		assert.Equal(t, want, engines)
	default:
		assert.Equal(t, []string{alone, busyCPU}, engines[:2], "the cpu reference runs everywhere")
		assert.Contains(t, engines, "std-fs")
		assert.NotContains(t, engines, "std-fs+dontcache", "%s refuses RWF_DONTCACHE", testenv.FS())
		assert.Contains(t, stderr, "skipped std-fs+dontcache")
	}
	// The plot has a line per row, named in its legend.
	svg, err := os.ReadFile(plot)
	require.NoError(t, err)
	for _, e := range engines {
		assert.Contains(t, string(svg), ">"+e+": p99 ", "no line for %s in the plot", e)
	}
	// Progress on a pipe: a line per phase; the rows are one per
	// engine, the medians of both rounds.
	assert.Contains(t, stderr, "dio-check pressure: round 1/2: alone: measuring\n")
	assert.Contains(t, stderr, "dio-check pressure: round 2/2: std-fs: measuring\n")
	requireNoCgroup(t, root, stderr)
	testenv.RequireEmpty(t, dir)
}

func TestPressureInterrupt(t *testing.T) {
	root := pressureRoot(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := testenv.Dir(t)
			inMemoryFS(t, dir)
			cmd := exec.Command(binary, "pressure", "-seconds", "3", "-lead", "0", "-memory", "256MiB", "-hot", "64MiB", "-engines", "std-fs", dir)
			errPipe, err := cmd.StderrPipe()
			require.NoError(t, err)
			var stdout bytes.Buffer
			cmd.Stdout = &stdout
			require.NoError(t, cmd.Start())
			// Interrupt while the ingest and the co-tenant both run,
			// with the hot file and the ingest's file on disk.
			sc := bufio.NewScanner(errPipe)
			var seen []string
			for sc.Scan() {
				seen = append(seen, sc.Text())
				if sc.Text() == "dio-check pressure: std-fs: measuring" {
					break
				}
			}
			require.Contains(t, seen, "dio-check pressure: std-fs: measuring", "stderr: %q", seen)
			time.Sleep(500 * time.Millisecond)
			ents, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.NotEmpty(t, ents, "nothing to clean up yet")
			kids := children([]int{cmd.Process.Pid})
			require.NotEmpty(t, kids, "no measuring process")
			cotenants := children(kids)
			require.NotEmpty(t, cotenants, "no co-tenant process beside the ingest")
			kids = append(kids, cotenants...)
			start := time.Now()
			require.NoError(t, cmd.Process.Signal(sig))
			var rest bytes.Buffer
			rest.ReadFrom(errPipe) // EOF: the parent and the child are gone
			err = cmd.Wait()
			assert.Less(t, time.Since(start), 10*time.Second, "the interrupt did not stop the run")
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee)
			assert.Equal(t, 128+int(sig), ee.ExitCode(), rest.String())
			assert.Contains(t, rest.String(), "removed temporary files")
			assert.Empty(t, stdout.String(), "no table from an interrupted run")
			requireNoCgroup(t, root, strings.Join(seen, "\n"))
			testenv.RequireEmpty(t, dir)
			for _, pid := range kids {
				assert.True(t, gone(pid), "the measuring or co-tenant process %d outlived dio-check", pid)
			}
		})
	}
}

// TestPressureNeedsRoot runs pressure as nobody: exit 2, the reason on
// stderr, nothing made. As root the test drops to uid 65534 itself.
func TestPressureNeedsRoot(t *testing.T) {
	// A directory and a binary that nobody can reach: the reason must be
	// root, not a directory it cannot stat.
	dir, err := os.MkdirTemp("", "dio-pressure-nobody-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o777))
	cmd := exec.Command(binary, "pressure", "-seconds", "1", "-memory", "256MiB", "-hot", "64MiB", dir)
	if os.Geteuid() == 0 {
		require.NoError(t, os.Chmod(filepath.Dir(binary), 0o755))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "stderr: %s", stderr.String())
	assert.Equal(t, 2, ee.ExitCode())
	assert.Equal(t, "dio-check: pressure needs root: it makes a memory cgroup\n", stderr.String())
	assert.Empty(t, stdout.String())
	testenv.RequireEmpty(t, dir)
}

// TestPressureNoController runs pressure where neither hierarchy has the
// memory controller (a v2 root offering cpu alone, no v1 memory): exit 2
// with the reason, and nothing made.
func TestPressureNoController(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("pressure checks for root before it looks for a controller")
	}
	dir := testenv.Dir(t)
	inMemoryFS(t, dir)
	v2 := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(v2, "cgroup.controllers"), []byte("cpu pids\n"), 0o644))
	discoverCgroups = func() (cgroup.Roots, error) { return cgroup.Roots{V2: v2}, nil }
	t.Cleanup(func() { discoverCgroups = cgroup.Discover })

	var stdout, stderr bytes.Buffer
	err := run([]string{"pressure", "-seconds", "1", "-memory", "256MiB", "-hot", "64MiB", dir}, &stdout, &stderr, newTempFiles())
	var ue usageError
	require.ErrorAs(t, err, &ue, "exit 2")
	assert.ErrorContains(t, err, "pressure: "+cgroup.ErrNoController.Error())
	assert.Empty(t, stdout.String())
	testenv.RequireEmpty(t, dir)
	ents, err := os.ReadDir(v2)
	require.NoError(t, err)
	assert.Len(t, ents, 1, "a cgroup was made without a controller")
}

// gone reports whether the process pid has exited (gone or a zombie),
// waiting up to two seconds for it.
func gone(pid int) bool {
	for range 200 {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		// The state follows the command name in parentheses.
		if i := bytes.LastIndexByte(stat, ')'); err != nil || i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// TestPressureProgressTerminal runs pressure with stderr on a 40-column
// terminal: its live line, redrawn in place, is never wider than the
// terminal, as the bench's bar (TestBenchProgressTerminal).
func TestPressureProgressTerminal(t *testing.T) {
	root := pressureRoot(t)
	dir := testenv.Dir(t)
	inMemoryFS(t, dir)
	cmd := exec.Command(binary, "pressure", "-json", "-seconds", "1", "-lead", "0", "-memory", "256MiB", "-hot", "32MiB", "-engines", "std-fs", dir)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	// The line redraws with "\r\033[K".
	text := onTerminal(t, cmd, 40)
	lines := 0
	for _, line := range strings.Split(text, "\n") {
		// What follows a redraw; before the first is a line of its own,
		// such as the cgroup's, which may wrap.
		parts := strings.Split(line, "\r\033[K")
		for _, part := range parts[1:] {
			if !strings.HasPrefix(part, "dio-check pressure: ") {
				continue // a note after the live line's last clearing
			}
			assert.LessOrEqual(t, utf8.RuneCountInString(part), 39, "wider than the terminal: %q", part)
			lines++
		}
	}
	assert.Positive(t, lines, "no live line: %q", text)
	assert.Contains(t, text, "measuring", "the phases: %q", text)
	requireNoCgroup(t, root, text)
	testenv.RequireEmpty(t, dir)
}
