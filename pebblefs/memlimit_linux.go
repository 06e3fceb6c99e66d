package pebblefs

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// memoryLimit returns the memory this process may use: its memory
// cgroup's limit (v1 memory.limit_in_bytes, v2 memory.max) when it has
// one below the machine's memory, else MemTotal; 0 when neither can be
// read.
func memoryLimit() int64 {
	total := memTotal()
	if lim := cgroupLimit(); lim > 0 && (total == 0 || lim < total) {
		return lim
	}
	return total
}

func memTotal() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// cgroupLimit reads the limit of this process's memory cgroup, and of
// each cgroup above it (the tightest binds); 0 for none.
func cgroupLimit() int64 {
	if m := findMemoryCgroup(); m != nil {
		return m.limit
	}
	return 0
}

// memoryCgroup is the memory cgroup whose limit binds this process: the
// tightest of its own and those above it.
type memoryCgroup struct {
	limit    int64
	usage    string // memory.usage_in_bytes (v1) or memory.current (v2)
	stat     string // memory.stat
	inactive string // memory.stat's key for inactive page cache
}

// findMemoryCgroup returns the memory cgroup whose limit binds this
// process, or nil when none has a limit or none can be read.
func findMemoryCgroup() *memoryCgroup {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	var best *memoryCgroup
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		f := strings.SplitN(s.Text(), ":", 3)
		if len(f) != 3 {
			continue
		}
		var m memoryCgroup
		var root, limit string
		switch {
		case strings.Contains(","+f[1]+",", ",memory,"):
			root, limit = "/sys/fs/cgroup/memory", "memory.limit_in_bytes"
			m.usage, m.inactive = "memory.usage_in_bytes", "total_inactive_file"
		case f[0] == "0":
			root, limit = "/sys/fs/cgroup", "memory.max"
			m.usage, m.inactive = "memory.current", "inactive_file"
		default:
			continue
		}
		for dir := f[2]; ; dir = filepath.Dir(dir) {
			if n, err := readInt(filepath.Join(root, dir, limit)); err == nil && n > 0 && (best == nil || n < best.limit) {
				best = &memoryCgroup{limit: n, usage: filepath.Join(root, dir, m.usage),
					stat: filepath.Join(root, dir, "memory.stat"), inactive: m.inactive}
			}
			if dir == "/" || dir == "." {
				break
			}
		}
	}
	return best
}

// workingSet returns the cgroup's memory less its inactive page cache,
// which the kernel reclaims before it kills (what the kubelet and
// cAdvisor call the working set). Below floor it may return the usage
// alone, an upper bound, and skip reading memory.stat.
func (m *memoryCgroup) workingSet(floor int64) (int64, error) {
	usage, err := readInt(m.usage)
	if err != nil || usage < floor {
		return usage, err
	}
	data, err := os.ReadFile(m.stat)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, m.inactive+" "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
			if err != nil {
				return 0, err
			}
			return max(usage-n, 0), nil
		}
	}
	return usage, nil
}

// readInt reads a file holding one decimal number ("max", v2's
// unlimited, is an error).
func readInt(name string) (int64, error) {
	v, err := os.ReadFile(name)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64)
}
