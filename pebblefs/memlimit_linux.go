package pebblefs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
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
	control  string // v1's cgroup.event_control, for notifyAbove; "" on v2

	// usage's and stat's files, opened by the first workingSet and kept
	// until close: a check then costs a pread of each (1 and 8 µs here)
	// rather than an open, a read and a close (14 and 36 µs).
	usageFile, statFile *os.File
	buf                 []byte
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
		var root, limit, control string
		switch {
		case strings.Contains(","+f[1]+",", ",memory,"):
			root, limit, control = "/sys/fs/cgroup/memory", "memory.limit_in_bytes", "cgroup.event_control"
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
				if control != "" {
					best.control = filepath.Join(root, dir, control)
				}
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
// cAdvisor call the working set), and its usage. Below floor it may
// return the usage alone for both, the working set's upper bound, and
// skip reading memory.stat. One goroutine at a time may call it.
func (m *memoryCgroup) workingSet(floor int64) (ws, usage int64, err error) {
	data, err := m.read(&m.usageFile, m.usage)
	if err != nil {
		return 0, 0, err
	}
	usage, err = parseInt(data)
	if err != nil || usage < floor {
		return usage, usage, err
	}
	data, err = m.read(&m.statFile, m.stat)
	if err != nil {
		return 0, 0, err
	}
	key := m.inactive + " "
	for line := range bytes.Lines(data) {
		if rest, ok := bytes.CutPrefix(line, []byte(key)); ok {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(rest)), 10, 64)
			if err != nil {
				return 0, 0, err
			}
			return max(usage-n, 0), usage, nil
		}
	}
	return usage, usage, nil
}

// read reads the file name from its start, through *f, which it opens
// if nil and keeps open. A cgroup's files are generated anew by each
// read from offset 0.
func (m *memoryCgroup) read(f **os.File, name string) ([]byte, error) {
	if *f == nil {
		file, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		*f = file
	}
	if m.buf == nil {
		m.buf = make([]byte, 16<<10) // memory.stat is 1-3 KB
	}
	n, err := (*f).ReadAt(m.buf, 0)
	switch {
	case err == io.EOF:
	case err != nil:
		return nil, err
	case n == len(m.buf):
		return nil, fmt.Errorf("pebblefs: %s is larger than %d bytes", name, len(m.buf))
	}
	return m.buf[:n], nil
}

// close closes the files workingSet keeps open.
func (m *memoryCgroup) close() {
	for _, f := range []**os.File{&m.usageFile, &m.statFile} {
		if *f != nil {
			(*f).Close()
			*f = nil
		}
	}
}

// notifyAbove has the kernel signal each time the cgroup's usage crosses
// threshold, either way, through an eventfd registered with v1's
// cgroup.event_control; each signal is a send on the channel it returns,
// dropped while one is waiting. release ends it (closing the eventfd
// unregisters it). v2 has no such event for memory.max: there, and where
// event_control cannot be written, it fails and the watcher polls alone.
func (m *memoryCgroup) notifyAbove(threshold int64) (crossed <-chan struct{}, release func(), err error) {
	if m.control == "" {
		return nil, nil, errors.ErrUnsupported
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, nil, os.NewSyscallError("eventfd", err)
	}
	ev := os.NewFile(uintptr(efd), "memory threshold") // non-blocking: its reads wait in Go's poller
	usage, err := os.Open(m.usage)
	if err != nil {
		ev.Close()
		return nil, nil, err
	}
	defer usage.Close() // the kernel keeps the eventfd, not this file
	err = os.WriteFile(m.control, fmt.Appendf(nil, "%d %d %d", efd, usage.Fd(), threshold), 0)
	if err != nil {
		ev.Close()
		return nil, nil, err
	}
	ch := make(chan struct{}, 1)
	go func() {
		var count [8]byte
		for {
			if _, err := ev.Read(count[:]); err != nil {
				return // closed by release
			}
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
	return ch, func() { ev.Close() }, nil
}

// readInt reads a file holding one decimal number ("max", v2's
// unlimited, is an error).
func readInt(name string) (int64, error) {
	v, err := os.ReadFile(name)
	if err != nil {
		return 0, err
	}
	return parseInt(v)
}

// parseInt parses a cgroup file's one decimal number.
func parseInt(data []byte) (int64, error) {
	return strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
}
