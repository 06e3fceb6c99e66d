package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/internal/cgroup"
	"github.com/dio-storage/dio/internal/testenv"
)

// throttleRoot skips the test unless -throttle can run here (root, a
// memory cgroup, a write throttle, loop devices, mkfs.ext4), and returns
// the memory hierarchy's root.
func throttleRoot(t *testing.T) string {
	t.Helper()
	// The filesystem measured is the ext4 on the device, whatever holds
	// its file: the matrix's legs would test the same again, at CI's
	// cost, so these run in the plain go test run alone.
	if fs := testenv.FS(); fs != "" {
		t.Skipf("-throttle measures its own ext4; tested once, outside the %s leg", fs)
	}
	root := pressureRoot(t)
	roots, err := cgroup.Discover()
	require.NoError(t, err)
	if err := cgroup.CanThrottle(cgroup.OS{}, roots); err != nil {
		t.Skip(err)
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skip("no loop devices")
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("no mkfs.ext4")
	}
	return root
}

var deviceLine = regexp.MustCompile(`dio-check pressure: device (/dev/loop\d+) \((\d+:\d+)\) over (\S+) on (\S+),`)

// requireNoDevice fails unless the run whose stderr is given named its
// device and left none of it: no loop device over its file, no write
// limit on its number, no mount, no file in dir.
func requireNoDevice(t *testing.T, dir, stderr string) {
	t.Helper()
	m := deviceLine.FindStringSubmatch(stderr)
	require.NotNil(t, m, "no device line in %q", stderr)
	img, mnt := filepath.Join(dir, m[3]), m[4]
	// Autoclear may detach the device a moment after its last close.
	var backing []string
	for range 100 {
		backing = nil
		files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil && strings.HasPrefix(strings.TrimSpace(string(b)), img) {
				backing = append(backing, f)
			}
		}
		if len(backing) == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	assert.Empty(t, backing, "a loop device over %s is left", img)
	roots, err := cgroup.Discover()
	require.NoError(t, err)
	if roots.V1Blkio != "" {
		rules, err := os.ReadFile(filepath.Join(roots.V1Blkio, "blkio.throttle.write_bps_device"))
		require.NoError(t, err)
		assert.NotContains(t, string(rules), m[2]+" ", "the write limit on %s is left", m[1])
	}
	info, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	assert.NotContains(t, string(info), " "+mnt+" ", "%s is still mounted", mnt)
	testenv.RequireEmpty(t, dir)
}

// TestPressureThrottle runs pressure on a throttled device, small: the
// rows, the device in the header, and nothing left behind.
func TestPressureThrottle(t *testing.T) {
	root := throttleRoot(t)
	dir := testenv.Dir(t)
	out, stderr, code := dioCheck(t, "pressure", "-throttle", "100MiB", "-json", "-seconds", "1", "-lead", "1", "-memory", "128MiB", "-hot", "32MiB",
		"-engines", "std-fs,direct+io_uring", dir)
	require.Equal(t, 0, code, stderr)
	t.Logf("%s%s", out, stderr)
	var engines []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var row PressureRow
		require.NoError(t, json.Unmarshal([]byte(line), &row), line)
		engines = append(engines, row.Engine)
		if row.Engine != alone {
			assert.Positive(t, row.IngestMiBs, row.Engine)
		}
	}
	assert.Equal(t, []string{alone, "std-fs", "direct+io_uring"}, engines)
	assert.Contains(t, stderr, "writes throttled to 100MiB/s")
	requireNoCgroup(t, root, stderr)
	requireNoDevice(t, dir, stderr)
}

// TestPressureThrottleInterrupt interrupts a throttled run while the
// ingest and the co-tenant run: exit 130, and the device, its limit, its
// mount and file, and the cgroup all gone.
func TestPressureThrottleInterrupt(t *testing.T) {
	root := throttleRoot(t)
	dir := testenv.Dir(t)
	cmd := exec.Command(binary, "pressure", "-throttle", "100MiB", "-seconds", "5", "-lead", "0", "-memory", "128MiB", "-hot", "32MiB", "-engines", "std-fs", dir)
	errPipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	require.NoError(t, cmd.Start())
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
	start := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	var rest bytes.Buffer
	rest.ReadFrom(errPipe)
	err = cmd.Wait()
	assert.Less(t, time.Since(start), 20*time.Second, "the interrupt did not stop the run")
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 130, ee.ExitCode(), rest.String())
	assert.Contains(t, rest.String(), "removed temporary files")
	assert.Empty(t, stdout.String())
	all := strings.Join(seen, "\n") + "\n" + rest.String()
	requireNoCgroup(t, root, all)
	requireNoDevice(t, dir, all)
}

// TestPressureNoThrottle runs -throttle where the memory hierarchy has no
// write throttle beside it: exit 2 with the reason, nothing made.
func TestPressureNoThrottle(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("pressure checks for root before it looks for a throttle")
	}
	dir := testenv.Dir(t)
	v1 := t.TempDir()
	discoverCgroups = func() (cgroup.Roots, error) { return cgroup.Roots{V1Memory: v1}, nil }
	t.Cleanup(func() { discoverCgroups = cgroup.Discover })
	var stdout, stderr bytes.Buffer
	err := run([]string{"pressure", "-throttle", "200MiB", "-seconds", "1", "-memory", "256MiB", "-hot", "64MiB", dir}, &stdout, &stderr, newTempFiles())
	var ue usageError
	require.ErrorAs(t, err, &ue, "exit 2")
	assert.EqualError(t, err, "pressure -throttle: "+cgroup.ErrNoThrottle.Error())
	assert.NotContains(t, err.Error(), "\n", "one line")
	assert.Empty(t, stdout.String())
	testenv.RequireEmpty(t, dir)
	ents, err := os.ReadDir(v1)
	require.NoError(t, err)
	assert.Empty(t, ents, "a cgroup was made without a throttle")
}
