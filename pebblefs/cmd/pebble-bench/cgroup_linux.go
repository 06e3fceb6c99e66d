package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cgroup is a memory cgroup (v1, or v2 where the unified hierarchy has
// the memory controller) holding one engine's process: its limit binds
// Pebble's block cache, its heap and, on vfs.Default, the page cache of
// its files, all together.
type cgroup struct {
	dir string
	v2  bool
}

// newCgroup makes a memory cgroup below this process's own, limited to
// limit bytes.
func newCgroup(name string, limit int64) (*cgroup, error) {
	parent, err := memoryParent()
	if err != nil {
		return nil, err
	}
	c := &cgroup{dir: filepath.Join(parent.dir, name), v2: parent.v2}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return nil, err
	}
	if err := c.setLimit(limit); err != nil {
		c.remove()
		return nil, err
	}
	return c, nil
}

// memoryParent returns this process's own memory cgroup, where newCgroup
// makes its cgroups.
func memoryParent() (*cgroup, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	var c *cgroup
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		f := strings.SplitN(s.Text(), ":", 3)
		if len(f) != 3 {
			continue
		}
		switch {
		case strings.Contains(","+f[1]+",", ",memory,"):
			c = &cgroup{dir: filepath.Join("/sys/fs/cgroup/memory", f[2])}
		case f[0] == "0" && c == nil:
			if ctl, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil && bytes.Contains(ctl, []byte("memory")) {
				c = &cgroup{dir: filepath.Join("/sys/fs/cgroup", f[2]), v2: true}
			}
		}
	}
	if c == nil {
		return nil, fmt.Errorf("no memory cgroup controller")
	}
	return c, nil
}

func (c *cgroup) write(file, v string) error {
	return os.WriteFile(filepath.Join(c.dir, file), []byte(v), 0)
}

// join moves process pid into c.
func (c *cgroup) join(pid int) error { return c.write("cgroup.procs", strconv.Itoa(pid)) }

// resetPeak starts the peak over (v2 needs Linux 6.12; an error there is
// ignored, the peak is then the cgroup's whole life).
func (c *cgroup) resetPeak() {
	if c.v2 {
		_ = c.write("memory.peak", "0")
		return
	}
	_ = c.write("memory.max_usage_in_bytes", "0")
}

// peak returns the cgroup's memory high-water mark.
func (c *cgroup) peak() int64 {
	file := "memory.max_usage_in_bytes"
	if c.v2 {
		file = "memory.peak"
	}
	b, _ := os.ReadFile(filepath.Join(c.dir, file))
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// pageCache returns the page cache charged to the cgroup.
func (c *cgroup) pageCache() int64 {
	key := "cache"
	if c.v2 {
		key = "file"
	}
	b, _ := os.ReadFile(filepath.Join(c.dir, "memory.stat"))
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// remove removes the cgroup once its processes are gone.
func (c *cgroup) remove() error {
	var err error
	for range 50 {
		if err = os.Remove(c.dir); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// setLimit changes the cgroup's memory limit; -1 lifts it.
func (c *cgroup) setLimit(limit int64) error {
	if !c.v2 {
		return c.write("memory.limit_in_bytes", strconv.FormatInt(limit, 10))
	}
	if limit < 0 {
		return c.write("memory.max", "max")
	}
	return c.write("memory.max", strconv.FormatInt(limit, 10))
}

// procsFile is the file a process writes its pid to, to join c.
func (c *cgroup) procsFile() string { return filepath.Join(c.dir, "cgroup.procs") }

// env is c as a child finds it in cgroupEnv.
func (c *cgroup) env() string {
	if c.v2 {
		return "v2:" + c.dir
	}
	return "v1:" + c.dir
}

// cgroupFromEnv returns the cgroup cgroupEnv names, or nil.
func cgroupFromEnv() *cgroup {
	v := os.Getenv(cgroupEnv)
	if v == "" {
		return nil
	}
	ver, dir, _ := strings.Cut(v, ":")
	return &cgroup{dir: dir, v2: ver == "v2"}
}
