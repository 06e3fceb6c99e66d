package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeFS is a cgroupfs in a temporary directory: Mkdir populates the
// control files the kernel would, a pid written to a cgroup.procs leaves
// every other one, and Rmdir refuses a cgroup that still has tasks.
type fakeFS struct {
	t       *testing.T
	root    string
	version Version
	stuck   map[int]bool // pids that cannot be moved (EPERM)
	refuse  string       // a control file whose writes fail (EINVAL)
	resets  int          // writes through OpenRW
	writes  []string     // what was written to io.max, as "io.max: value"
}

func newFake(t *testing.T, v Version) *fakeFS {
	f := &fakeFS{t: t, root: t.TempDir(), version: v, stuck: map[int]bool{}}
	f.populate(f.root)
	return f
}

func (f *fakeFS) populate(dir string) {
	files := map[string]string{"cgroup.procs": ""}
	if f.version == V2 {
		files["memory.max"], files["memory.peak"], files["memory.current"] = "max\n", "0\n", "0\n"
		files["cgroup.controllers"], files["cgroup.subtree_control"] = "cpuset cpu io memory pids\n", "\n"
		files["io.max"] = ""
	} else {
		files["memory.limit_in_bytes"], files["memory.max_usage_in_bytes"], files["memory.usage_in_bytes"] = "9223372036854771712\n", "0\n", "0\n"
	}
	for name, v := range files {
		require.NoError(f.t, os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644))
	}
}

func (f *fakeFS) ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }

func (f *fakeFS) ReadDir(name string) ([]os.DirEntry, error) { return os.ReadDir(name) }

func (f *fakeFS) WriteFile(name string, data []byte) error {
	if _, err := os.Stat(name); err != nil {
		return err
	}
	base := filepath.Base(name)
	if base == f.refuse {
		return &os.PathError{Op: "write", Path: name, Err: syscall.EINVAL}
	}
	switch base {
	case "cgroup.procs":
		pid, err := strconv.Atoi(string(data))
		if err != nil {
			return &os.PathError{Op: "write", Path: name, Err: syscall.EINVAL}
		}
		if f.stuck[pid] {
			return &os.PathError{Op: "write", Path: name, Err: syscall.EPERM}
		}
		f.forget(pid)
		return f.appendPid(name, pid)
	case "cgroup.subtree_control":
		// cgroup v2's no-internal-process rule: a cgroup other than
		// the root that has tasks cannot hand a controller down.
		dir := filepath.Dir(name)
		if dir != f.root && strings.Contains(string(data), "+") && len(f.pids(filepath.Join(dir, "cgroup.procs"))) > 0 {
			return &os.PathError{Op: "write", Path: name, Err: syscall.EBUSY}
		}
		old, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		on := strings.Fields(string(old))
		for _, w := range strings.Fields(string(data)) {
			c := w[1:]
			switch {
			case w[0] == '+' && !slices.Contains(on, c):
				on = append(on, c)
			case w[0] == '-':
				on = slices.DeleteFunc(on, func(s string) bool { return s == c })
			}
		}
		return os.WriteFile(name, []byte(strings.Join(on, " ")+"\n"), 0o644)
	case "io.max":
		f.writes = append(f.writes, base+": "+string(data))
	case "blkio.throttle.write_bps_device":
		// Lines of "MAJ:MIN BPS"; 0 removes the device's.
		dev, bps, _ := strings.Cut(string(data), " ")
		old, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(string(old)), "\n") {
			if l != "" && !strings.HasPrefix(l, dev+" ") {
				lines = append(lines, l)
			}
		}
		if bps != "0" {
			lines = append(lines, string(data))
		}
		return os.WriteFile(name, []byte(strings.Join(lines, "\n")), 0o644)
	}
	return os.WriteFile(name, append(data, '\n'), 0o644)
}

// forget takes pid out of every cgroup.procs under the root.
func (f *fakeFS) forget(pid int) {
	filepath.WalkDir(f.root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.Name() != "cgroup.procs" {
			return err
		}
		pids := f.pids(path)
		if i := slices.Index(pids, pid); i >= 0 {
			f.writePids(path, slices.Delete(pids, i, i+1))
		}
		return nil
	})
}

func (f *fakeFS) pids(path string) []int {
	data, err := os.ReadFile(path)
	require.NoError(f.t, err)
	var pids []int
	for _, s := range strings.Fields(string(data)) {
		n, err := strconv.Atoi(s)
		require.NoError(f.t, err)
		pids = append(pids, n)
	}
	return pids
}

func (f *fakeFS) writePids(path string, pids []int) {
	var b strings.Builder
	for _, p := range pids {
		b.WriteString(strconv.Itoa(p) + "\n")
	}
	require.NoError(f.t, os.WriteFile(path, []byte(b.String()), 0o644))
}

func (f *fakeFS) appendPid(path string, pid int) error {
	f.writePids(path, append(f.pids(path), pid))
	return nil
}

func (f *fakeFS) Mkdir(name string) error {
	if err := os.Mkdir(name, 0o755); err != nil {
		return err
	}
	f.populate(name)
	return nil
}

func (f *fakeFS) Rmdir(name string) error {
	if _, err := os.Stat(name); err != nil {
		return err
	}
	if len(f.pids(filepath.Join(name, "cgroup.procs"))) > 0 {
		return &os.PathError{Op: "rmdir", Path: name, Err: syscall.EBUSY}
	}
	return os.RemoveAll(name)
}

type fakePeak struct {
	f    *fakeFS
	path string
}

func (p *fakePeak) ReadAt(b []byte, off int64) (int, error) {
	data, err := os.ReadFile(p.path)
	if err != nil {
		return 0, err
	}
	return copy(b, data[off:]), nil
}

func (p *fakePeak) Write(b []byte) (int, error) { p.f.resets++; return len(b), nil }
func (p *fakePeak) Close() error                { return nil }

func (f *fakeFS) OpenRW(name string) (File, error) {
	if _, err := os.Stat(name); err != nil {
		return nil, err
	}
	if filepath.Base(name) == f.refuse {
		// kernfs refuses to open a file without a write method for
		// writing: memory.peak before Linux 6.12.
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EACCES}
	}
	return &fakePeak{f: f, path: name}, nil
}

func (f *fakeFS) read(t *testing.T, path ...string) string {
	data, err := os.ReadFile(filepath.Join(append([]string{f.root}, path...)...))
	require.NoError(t, err)
	return strings.TrimSpace(string(data))
}

func TestParseMountinfo(t *testing.T) {
	// From this machine: v1 controllers, and an unified hierarchy
	// without any.
	info := `24 31 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
29 24 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
30 29 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
33 29 0:30 / /sys/fs/cgroup/cpu rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,cpu
38 29 0:35 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:19 - cgroup cgroup rw,memory
39 29 0:36 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:20 - cgroup cgroup rw,pids
`
	assert.Equal(t, Roots{V2: "/sys/fs/cgroup/unified", V1Memory: "/sys/fs/cgroup/memory"}, parseMountinfo([]byte(info)))
	assert.Equal(t, Roots{}, parseMountinfo([]byte("garbage\n\n1 2 3 - cgroup\n")))
}

func TestV2(t *testing.T) {
	f := newFake(t, V2)
	f.appendPid(filepath.Join(f.root, "cgroup.procs"), 4242)
	c, err := New(f, Roots{V2: f.root}, "dio-test", 256<<20)
	require.NoError(t, err)
	assert.Equal(t, V2, c.Version)
	assert.Equal(t, filepath.Join(f.root, "dio-test"), c.Dir)
	assert.Equal(t, "memory", f.read(t, "cgroup.subtree_control"), "the memory controller was not handed to children")
	assert.Equal(t, strconv.Itoa(256<<20), f.read(t, "dio-test", "memory.max"))
	limit, err := c.Limit()
	require.NoError(t, err)
	assert.EqualValues(t, 256<<20, limit)

	require.NoError(t, c.Join(4242))
	assert.Equal(t, "4242", f.read(t, "dio-test", "cgroup.procs"))
	assert.Empty(t, f.read(t, "cgroup.procs"))

	require.NoError(t, os.WriteFile(filepath.Join(c.Dir, "memory.peak"), []byte("12345\n"), 0o644))
	require.NoError(t, c.ResetPeak())
	assert.Equal(t, 1, f.resets, "the peak was not reset through its descriptor")
	peak, err := c.Peak()
	require.NoError(t, err)
	assert.EqualValues(t, 12345, peak)

	// Remove moves the task left inside back to the root first.
	require.NoError(t, c.Remove())
	assert.NoDirExists(t, c.Dir)
	assert.Equal(t, "4242", f.read(t, "cgroup.procs"))
	require.NoError(t, c.Remove(), "removing a removed cgroup")
}

func TestV2WithoutMemoryUsesV1(t *testing.T) {
	v2 := newFake(t, V2)
	require.NoError(t, os.WriteFile(filepath.Join(v2.root, "cgroup.controllers"), []byte("cpu pids\n"), 0o644))
	v1 := newFake(t, V1)
	// One fake per hierarchy: New only touches v2's root to read it.
	c, err := New(v1, Roots{V2: v2.root, V1Memory: v1.root}, "dio-test", 1<<30)
	require.NoError(t, err)
	assert.Equal(t, V1, c.Version)
	assert.Equal(t, strconv.Itoa(1<<30), v1.read(t, "dio-test", "memory.limit_in_bytes"))

	require.NoError(t, c.Join(7))
	require.NoError(t, os.WriteFile(filepath.Join(c.Dir, "memory.max_usage_in_bytes"), []byte("999\n"), 0o644))
	require.NoError(t, c.ResetPeak())
	assert.Equal(t, "0", v1.read(t, "dio-test", "memory.max_usage_in_bytes"), "v1 resets the peak by writing 0")
	require.NoError(t, c.Remove())
	assert.NoDirExists(t, c.Dir)
	assert.Equal(t, "7", v1.read(t, "cgroup.procs"))
}

func TestNoController(t *testing.T) {
	_, err := New(OS{}, Roots{}, "dio-test", 1<<30)
	assert.ErrorIs(t, err, ErrNoController)

	v2 := newFake(t, V2)
	require.NoError(t, os.WriteFile(filepath.Join(v2.root, "cgroup.controllers"), []byte("cpu\n"), 0o644))
	_, err = New(v2, Roots{V2: v2.root}, "dio-test", 1<<30)
	assert.ErrorIs(t, err, ErrNoController)
	assert.NoDirExists(t, filepath.Join(v2.root, "dio-test"))
}

func TestNewCleansUpOnError(t *testing.T) {
	f := newFake(t, V1)
	f.refuse = "memory.limit_in_bytes"
	_, err := New(f, Roots{V1Memory: f.root}, "dio-test", 1<<30)
	require.ErrorIs(t, err, syscall.EINVAL)
	assert.NoDirExists(t, filepath.Join(f.root, "dio-test"), "a cgroup whose limit failed was left behind")

	for _, bad := range []string{"", ".", "..", "a/b"} {
		_, err := New(f, Roots{V1Memory: f.root}, bad, 1<<30)
		assert.Error(t, err, "name %q", bad)
	}
}

func TestRemoveStuckTask(t *testing.T) {
	f := newFake(t, V1)
	c, err := New(f, Roots{V1Memory: f.root}, "dio-test", 1<<30)
	require.NoError(t, err)
	require.NoError(t, c.Join(99))
	f.stuck[99] = true
	c.tries = 3
	err = c.Remove()
	require.Error(t, err)
	assert.True(t, errors.Is(err, syscall.EBUSY), "%v", err)
	delete(f.stuck, 99)
	require.NoError(t, c.Remove())
	assert.NoDirExists(t, c.Dir)
}

func TestV2PeakNotResettable(t *testing.T) {
	// Before Linux 6.12 memory.peak is read-only: ResetPeak says so in a
	// way the caller can accept, and Peak reads the peak since the
	// cgroup was made.
	f := newFake(t, V2)
	c, err := New(f, Roots{V2: f.root}, "dio-test", 256<<20)
	require.NoError(t, err)
	f.refuse = "memory.peak"
	require.NoError(t, os.WriteFile(filepath.Join(c.Dir, "memory.peak"), []byte("777\n"), 0o644))
	err = c.ResetPeak()
	require.ErrorIs(t, err, ErrPeakNotReset)
	assert.ErrorIs(t, err, syscall.EACCES)
	peak, err := c.Peak()
	require.NoError(t, err)
	assert.EqualValues(t, 777, peak)
	require.NoError(t, c.Remove())
	assert.NoDirExists(t, c.Dir)
}

// TestV2UnderOwnCgroup makes the cgroup under the caller's own: beside it,
// in the nearest ancestor that hands memory down (a systemd slice); else
// the root's subtree_control gets memory, and loses it again at Remove,
// unless another cgroup made meanwhile came to depend on it.
func TestV2UnderOwnCgroup(t *testing.T) {
	f := newFake(t, V2)
	slice, scope := filepath.Join(f.root, "user.slice"), filepath.Join(f.root, "user.slice", "session-1.scope")
	require.NoError(t, f.Mkdir(slice))
	require.NoError(t, f.Mkdir(scope))
	require.NoError(t, f.appendPid(filepath.Join(scope, "cgroup.procs"), 4242))
	r := Roots{V2: f.root, SelfV2: "/user.slice/session-1.scope"}

	// The scope has a task: it cannot hand memory down, and nothing
	// above it does. The root can.
	c, err := New(f, r, "dio-test", 256<<20)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(f.root, "dio-test"), c.Dir)
	assert.Equal(t, "memory", f.read(t, "cgroup.subtree_control"))
	require.NoError(t, c.Remove())
	assert.Empty(t, f.read(t, "cgroup.subtree_control"), "+memory left in the root's subtree_control")
	assert.NoDirExists(t, c.Dir)

	// Another run's cgroup made meanwhile keeps the controller.
	c, err = New(f, r, "dio-test", 256<<20)
	require.NoError(t, err)
	require.NoError(t, f.Mkdir(filepath.Join(f.root, "other-run")))
	require.NoError(t, c.Remove())
	assert.Equal(t, "memory", f.read(t, "cgroup.subtree_control"), "disabled under another run's cgroup")
	require.NoError(t, f.Rmdir(filepath.Join(f.root, "other-run")))
	require.NoError(t, f.WriteFile(filepath.Join(f.root, "cgroup.subtree_control"), []byte("-memory")))

	// A slice that hands memory down takes the cgroup, beside the
	// caller's scope, and nothing is enabled anywhere.
	require.NoError(t, f.WriteFile(filepath.Join(slice, "cgroup.subtree_control"), []byte("+memory")))
	c, err = New(f, r, "dio-test", 256<<20)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(slice, "dio-test"), c.Dir)
	assert.Empty(t, f.read(t, "cgroup.subtree_control"))
	require.NoError(t, c.Join(4242))
	require.NoError(t, c.Remove())
	assert.Equal(t, "memory", f.read(t, "user.slice", "cgroup.subtree_control"), "the slice's own setting was taken away")
	assert.Equal(t, []int{4242}, f.pids(filepath.Join(slice, "cgroup.procs")), "Remove moves tasks to the parent")

	// A caller's own cgroup without tasks (delegated, the caller's
	// process elsewhere) gets memory enabled and disabled again.
	require.NoError(t, f.WriteFile(filepath.Join(slice, "cgroup.subtree_control"), []byte("-memory")))
	f.writePids(filepath.Join(slice, "cgroup.procs"), nil)
	c, err = New(f, Roots{V2: f.root, SelfV2: "/user.slice"}, "dio-test", 256<<20)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(slice, "dio-test"), c.Dir)
	require.NoError(t, c.Remove())
	assert.Empty(t, f.read(t, "user.slice", "cgroup.subtree_control"))
	assert.Empty(t, f.read(t, "cgroup.subtree_control"))
}

func TestV1UnderOwnCgroup(t *testing.T) {
	f := newFake(t, V1)
	own := filepath.Join(f.root, "process_api", "abc")
	require.NoError(t, os.MkdirAll(filepath.Dir(own), 0o755))
	require.NoError(t, f.Mkdir(own))
	c, err := New(f, Roots{V1Memory: f.root, SelfV1Memory: "/process_api/abc"}, "dio-test", 1<<30)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(own, "dio-test"), c.Dir)
	require.NoError(t, c.Join(7))
	require.NoError(t, c.Remove())
	assert.NoDirExists(t, c.Dir)
	assert.Equal(t, []int{7}, f.pids(filepath.Join(own, "cgroup.procs")), "Remove moves tasks to the parent")

	// A container's view: its cgroup is the mount's root, and the path
	// /proc/self/cgroup gives is not there.
	c, err = New(f, Roots{V1Memory: f.root, SelfV1Memory: "/docker/0123"}, "dio-test", 1<<30)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(f.root, "dio-test"), c.Dir)
	require.NoError(t, c.Remove())
}

func TestParseSelf(t *testing.T) {
	// From this machine, and a systemd host's unified line.
	v2, v1 := parseSelf([]byte("9:name=systemd:/\n4:memory:/process_api/38d6\n1:cpu,cpuacct:/\n0::/\n"))
	assert.Equal(t, "/", v2)
	assert.Equal(t, "/process_api/38d6", v1)
	v2, v1 = parseSelf([]byte("0::/user.slice/user-0.slice/session-3.scope\n"))
	assert.Equal(t, "/user.slice/user-0.slice/session-3.scope", v2)
	assert.Empty(t, v1)
	v2, _ = parseSelf([]byte("0::/../../init.scope\n"))
	assert.Equal(t, "/", v2, "a cgroup outside the namespace")
}

func TestThrottleWrites(t *testing.T) {
	t.Run("v1", func(t *testing.T) {
		mem, blk := newFake(t, V1), t.TempDir()
		rules := filepath.Join(blk, "blkio.throttle.write_bps_device")
		require.NoError(t, os.WriteFile(rules, []byte("8:0 1000"), 0o644))
		c, err := New(mem, Roots{V1Memory: mem.root, V1Blkio: blk}, "dio-test", 1<<30)
		require.NoError(t, err)
		require.NoError(t, CanThrottle(mem, Roots{V1Memory: mem.root, V1Blkio: blk}))
		require.NoError(t, c.ThrottleWrites("7:3", 200<<20))
		got, _ := os.ReadFile(rules)
		assert.Equal(t, "8:0 1000\n7:3 209715200", string(got), "the rule goes on the blkio root")
		require.NoError(t, c.Unthrottle())
		got, _ = os.ReadFile(rules)
		assert.Equal(t, "8:0 1000", string(got), "Unthrottle clears the rule, and only it")
		require.NoError(t, c.ThrottleWrites("7:3", 100<<20))
		require.NoError(t, c.Remove())
		got, _ = os.ReadFile(rules)
		assert.Equal(t, "8:0 1000", string(got), "Remove clears the rule, and only it")
		assert.Error(t, c.ThrottleWrites("7:3", 0))
	})
	t.Run("v2", func(t *testing.T) {
		f := newFake(t, V2)
		c, err := New(f, Roots{V2: f.root}, "dio-test", 1<<30)
		require.NoError(t, err)
		require.NoError(t, CanThrottle(f, Roots{V2: f.root}))
		require.NoError(t, c.ThrottleWrites("7:3", 200<<20))
		assert.Equal(t, "memory io", f.read(t, "cgroup.subtree_control"))
		assert.Equal(t, []string{"io.max: 7:3 wbps=209715200"}, f.writes)
		require.NoError(t, c.Remove())
		assert.Empty(t, f.read(t, "cgroup.subtree_control"), "io and memory left enabled")
	})
	t.Run("none", func(t *testing.T) {
		f := newFake(t, V1)
		c, err := New(f, Roots{V1Memory: f.root}, "dio-test", 1<<30)
		require.NoError(t, err)
		assert.ErrorIs(t, c.ThrottleWrites("7:3", 1<<20), ErrNoThrottle)
		assert.ErrorIs(t, CanThrottle(f, Roots{V1Memory: f.root}), ErrNoThrottle)
		require.NoError(t, c.Remove())
		v2 := newFake(t, V2)
		require.NoError(t, os.WriteFile(filepath.Join(v2.root, "cgroup.controllers"), []byte("memory pids\n"), 0o644))
		c, err = New(v2, Roots{V2: v2.root}, "dio-test", 1<<30)
		require.NoError(t, err)
		assert.ErrorIs(t, CanThrottle(v2, Roots{V2: v2.root}), ErrNoThrottle)
		assert.ErrorIs(t, c.ThrottleWrites("7:3", 1<<20), ErrNoThrottle)
		require.NoError(t, c.Remove())
	})
}

// TestLimitCacheRef: SetLimit sets and lifts the memory limit in each
// version's file; PageCache reads each version's memory.stat key; a Ref
// opens the same cgroup elsewhere (a child process); Parent is where New
// makes its cgroups.
func TestLimitCacheRef(t *testing.T) {
	for _, v := range []Version{V1, V2} {
		t.Run(fmt.Sprint("v", int(v)), func(t *testing.T) {
			f := newFake(t, v)
			r := Roots{V2: f.root}
			limit, key := "memory.max", "file"
			if v == V1 {
				r, limit, key = Roots{V1Memory: f.root}, "memory.limit_in_bytes", "cache"
			}
			parent, err := Parent(f, r)
			require.NoError(t, err)
			c, err := New(f, r, "dio-test", 1<<30)
			require.NoError(t, err)
			assert.Equal(t, parent, filepath.Dir(c.Dir), "Parent says where New makes cgroups")
			require.NoError(t, c.SetLimit(-1))
			want := "-1"
			if v == V2 {
				want = "max"
			}
			got, err := os.ReadFile(filepath.Join(c.Dir, limit))
			require.NoError(t, err)
			assert.Equal(t, want, strings.TrimSpace(string(got)))
			require.NoError(t, c.SetLimit(1<<20))
			n, err := c.Limit()
			require.NoError(t, err)
			assert.EqualValues(t, 1<<20, n)

			stat := "anon 7\n" + key + " 12288\nother 3\n"
			require.NoError(t, os.WriteFile(filepath.Join(c.Dir, "memory.stat"), []byte(stat), 0o644))
			n, err = c.PageCache()
			require.NoError(t, err)
			assert.EqualValues(t, 12288, n)

			o, err := OpenRef(f, c.Ref())
			require.NoError(t, err)
			assert.Equal(t, c.Dir, o.Dir)
			assert.Equal(t, v, o.Version)
			assert.Equal(t, filepath.Join(c.Dir, "cgroup.procs"), o.Procs())
			_, err = OpenRef(f, "v3:"+c.Dir)
			assert.Error(t, err)
			require.NoError(t, c.Remove())
		})
	}
}
