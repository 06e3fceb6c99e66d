// Package cgroup makes the memory cgroup dio-check pressure runs its work
// in: cgroup v2 where the unified hierarchy has the memory controller, else
// the v1 memory hierarchy. Every path is under a root given by the caller,
// so tests run it against a fake cgroupfs in a temporary directory.
package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrNoController reports that neither hierarchy offers a memory
// controller.
var ErrNoController = errors.New("no memory cgroup controller (neither cgroup v2 with memory enabled nor a v1 memory hierarchy is mounted)")

// ErrPeakNotReset reports a cgroup v2 memory.peak that this kernel cannot
// reset (Linux before 6.12 makes it read-only): Peak then reports the
// peak since the cgroup was made.
var ErrPeakNotReset = errors.New("cgroup: memory.peak cannot be reset before Linux 6.12; the peak is the cgroup's since it was made")

// Version is the cgroup hierarchy's version.
type Version int

// The versions.
const (
	V1 Version = 1
	V2 Version = 2
)

// Roots are where the hierarchies are mounted; an empty one is absent.
type Roots struct {
	V2       string // the unified (cgroup2) hierarchy
	V1Memory string // the v1 hierarchy with the memory controller
}

// FS is the file system the package works through: the real one, or a
// fake in tests. Its methods take absolute paths.
type FS interface {
	ReadFile(name string) ([]byte, error)
	WriteFile(name string, data []byte) error // the file must exist, as cgroupfs's control files do
	Mkdir(name string) error
	Rmdir(name string) error
	// OpenRW opens an existing file for reading and writing through one
	// descriptor, as v2's memory.peak keeps a reset per open file.
	OpenRW(name string) (File, error)
}

// File is an open control file.
type File interface {
	io.ReaderAt
	io.Writer
	io.Closer
}

// OS is the real file system.
type OS struct{}

// ReadFile reads the whole file.
func (OS) ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }

// WriteFile writes data to the existing file name in one write, as
// cgroupfs wants a value.
func (OS) WriteFile(name string, data []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Mkdir makes a directory: on cgroupfs, a cgroup.
func (OS) Mkdir(name string) error { return os.Mkdir(name, 0o755) }

// Rmdir removes a directory: on cgroupfs, a cgroup without tasks.
func (OS) Rmdir(name string) error { return os.Remove(name) }

// OpenRW opens an existing file for reading and writing.
func (OS) OpenRW(name string) (File, error) { return os.OpenFile(name, os.O_RDWR, 0) }

// Discover finds the hierarchies in /proc/self/mountinfo.
func Discover() (Roots, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return Roots{}, err
	}
	return parseMountinfo(data), nil
}

// parseMountinfo reads proc(5)'s mountinfo: mount point is field 5; after
// the " - " separator come the type and source, then the super options,
// which name the controllers of a v1 hierarchy.
func parseMountinfo(data []byte) Roots {
	var r Roots
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		switch g[0] {
		case "cgroup2":
			if r.V2 == "" {
				r.V2 = f[4]
			}
		case "cgroup":
			for _, o := range strings.Split(g[2], ",") {
				if o == "memory" && r.V1Memory == "" {
					r.V1Memory = f[4]
				}
			}
		}
	}
	return r
}

// A Cgroup is one memory cgroup made by New and removed by Remove.
type Cgroup struct {
	Dir     string
	Version Version
	root    string // the hierarchy's root, where Remove moves tasks back
	fs      FS
	peak    File // v2: memory.peak, open since ResetPeak
	tries   int  // Remove's rounds; 0: removeTries
}

// Choose returns the root of the hierarchy New would use, and its version.
func Choose(fsys FS, r Roots) (string, Version, error) {
	switch {
	case r.V2 != "" && v2Memory(fsys, r.V2):
		return r.V2, V2, nil
	case r.V1Memory != "":
		return r.V1Memory, V1, nil
	}
	return "", 0, ErrNoController
}

// New makes the cgroup name under the hierarchy in r that has the memory
// controller, v2 first, limited to limit bytes of memory.
func New(fsys FS, r Roots, name string, limit int64) (*Cgroup, error) {
	if strings.ContainsRune(name, '/') || name == "" || name == "." || name == ".." {
		return nil, fmt.Errorf("cgroup: bad name %q", name)
	}
	root, v, err := Choose(fsys, r)
	if err != nil {
		return nil, err
	}
	var c *Cgroup
	var limitFile string
	switch v {
	case V2:
		// The root's subtree_control must hand memory to its
		// children; the root cgroup may, although it has tasks.
		sub, err := fsys.ReadFile(filepath.Join(root, "cgroup.subtree_control"))
		if err != nil {
			return nil, err
		}
		if !hasWord(sub, "memory") {
			if err := fsys.WriteFile(filepath.Join(root, "cgroup.subtree_control"), []byte("+memory")); err != nil {
				return nil, fmt.Errorf("cgroup: enabling the v2 memory controller: %w", err)
			}
		}
		c = &Cgroup{Dir: filepath.Join(root, name), Version: V2, root: root, fs: fsys}
		limitFile = "memory.max"
	default:
		c = &Cgroup{Dir: filepath.Join(root, name), Version: V1, root: root, fs: fsys}
		limitFile = "memory.limit_in_bytes"
	}
	if err := fsys.Mkdir(c.Dir); err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	if err := c.write(limitFile, strconv.FormatInt(limit, 10)); err != nil {
		fsys.Rmdir(c.Dir)
		return nil, err
	}
	return c, nil
}

// v2Memory reports whether the unified hierarchy offers the memory
// controller.
func v2Memory(fsys FS, root string) bool {
	ctl, err := fsys.ReadFile(filepath.Join(root, "cgroup.controllers"))
	return err == nil && hasWord(ctl, "memory")
}

func hasWord(data []byte, w string) bool {
	for _, f := range strings.Fields(string(data)) {
		if f == w {
			return true
		}
	}
	return false
}

func (c *Cgroup) write(file, value string) error {
	if err := c.fs.WriteFile(filepath.Join(c.Dir, file), []byte(value)); err != nil {
		return fmt.Errorf("cgroup: writing %q to %s: %w", value, file, err)
	}
	return nil
}

// Open returns the cgroup at dir, made by New in another process, for Join
// and the peak.
func Open(fsys FS, dir string, v Version) *Cgroup {
	return &Cgroup{Dir: dir, Version: v, root: filepath.Dir(dir), fs: fsys}
}

// Join moves the process pid (all its threads) into the cgroup.
func (c *Cgroup) Join(pid int) error { return c.write("cgroup.procs", strconv.Itoa(pid)) }

// Limit returns the memory limit in bytes.
func (c *Cgroup) Limit() (int64, error) {
	file := "memory.max"
	if c.Version == V1 {
		file = "memory.limit_in_bytes"
	}
	return c.readInt(file)
}

// Usage returns the memory charged to the cgroup now, page cache included.
func (c *Cgroup) Usage() (int64, error) {
	file := "memory.current"
	if c.Version == V1 {
		file = "memory.usage_in_bytes"
	}
	return c.readInt(file)
}

// ResetPeak starts a new peak. v1 resets memory.max_usage_in_bytes. v2
// (Linux 6.12 and later) resets memory.peak for one open descriptor,
// which Peak then reads; on an older kernel, where memory.peak is
// read-only, the error matches ErrPeakNotReset and Peak reports the peak
// since the cgroup was made, which a caller may accept.
func (c *Cgroup) ResetPeak() error {
	if c.Version == V1 {
		return c.write("memory.max_usage_in_bytes", "0")
	}
	c.closePeak()
	f, err := c.fs.OpenRW(filepath.Join(c.Dir, "memory.peak"))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPeakNotReset, err)
	}
	if _, err := f.Write([]byte("reset")); err != nil {
		f.Close()
		return fmt.Errorf("%w: %w", ErrPeakNotReset, err)
	}
	c.peak = f
	return nil
}

func (c *Cgroup) closePeak() {
	if c.peak != nil {
		c.peak.Close()
		c.peak = nil
	}
}

// Peak returns the most memory charged to the cgroup since ResetPeak.
func (c *Cgroup) Peak() (int64, error) {
	switch {
	case c.Version == V1:
		return c.readInt("memory.max_usage_in_bytes")
	case c.peak == nil:
		return c.readInt("memory.peak")
	}
	var buf [32]byte
	n, err := c.peak.ReadAt(buf[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(buf[:n])), 10, 64)
}

func (c *Cgroup) readInt(file string) (int64, error) {
	data, err := c.fs.ReadFile(filepath.Join(c.Dir, file))
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return -1, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

// Tasks returns the processes in the cgroup.
func (c *Cgroup) Tasks() ([]int, error) {
	data, err := c.fs.ReadFile(filepath.Join(c.Dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("cgroup: cgroup.procs holds %q", f)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// removeTries bounds Remove's rounds of moving tasks out, 20 ms apart: a
// killed process keeps the cgroup busy until its last thread has exited,
// which can take a while when it was waiting on writeback.
const removeTries = 250

// Remove moves any task left in the cgroup back to the hierarchy's root
// and removes the cgroup. A cgroup already gone is not an error.
func (c *Cgroup) Remove() error {
	c.closePeak()
	tries := c.tries
	if tries == 0 {
		tries = removeTries
	}
	var err error
	for range tries {
		var pids []int
		pids, err = c.Tasks()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		for _, pid := range pids {
			// A task that exits meanwhile cannot be moved: ESRCH.
			if merr := c.fs.WriteFile(filepath.Join(c.root, "cgroup.procs"), []byte(strconv.Itoa(pid))); merr != nil && !errors.Is(merr, syscall.ESRCH) {
				err = merr
			}
		}
		err = c.fs.Rmdir(c.Dir)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("cgroup: removing %s: %w", c.Dir, err)
}

// Close releases what the Cgroup holds open, without removing it.
func (c *Cgroup) Close() { c.closePeak() }
