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
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0
	}
	best := int64(0)
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		f := strings.SplitN(s.Text(), ":", 3)
		if len(f) != 3 {
			continue
		}
		var root, file string
		switch {
		case strings.Contains(","+f[1]+",", ",memory,"):
			root, file = "/sys/fs/cgroup/memory", "memory.limit_in_bytes"
		case f[0] == "0":
			root, file = "/sys/fs/cgroup", "memory.max"
		default:
			continue
		}
		for dir := f[2]; ; dir = filepath.Dir(dir) {
			v, err := os.ReadFile(filepath.Join(root, dir, file))
			if err == nil {
				if n, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64); err == nil && n > 0 && (best == 0 || n < best) {
					best = n
				}
			}
			if dir == "/" || dir == "." {
				break
			}
		}
	}
	return best
}
