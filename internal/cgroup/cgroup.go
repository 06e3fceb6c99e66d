// Package cgroup makes the memory cgroups that dio-check pressure and
// pebble-bench run their work in: cgroup v2 where the unified hierarchy
// has the memory controller, else the v1 memory hierarchy. The cgroup goes under the caller's own, as
// systemd-run --scope puts a scope in the caller's slice, so that a tool
// run in a delegated subtree stays inside it; what New enables on the way
// (v2's controllers in a parent's cgroup.subtree_control) Remove takes back,
// so that the system is left as it was found. Every path is under a root
// given by the caller, so tests run it against a fake cgroupfs in a
// temporary directory.
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
	"slices"
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

// Roots are where the hierarchies are mounted, an empty one absent, and
// the caller's own cgroup in each (from /proc/self/cgroup), "/" or empty
// for the hierarchy's root.
type Roots struct {
	V2       string // the unified (cgroup2) hierarchy
	V1Memory string // the v1 hierarchy with the memory controller
	V1Blkio  string // the v1 hierarchy with the blkio controller

	SelfV2       string // the caller's cgroup in V2, such as "/user.slice/session-1.scope"
	SelfV1Memory string // the caller's cgroup in V1Memory
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
	// ReadDir lists a directory: in a cgroup, its child cgroups and
	// control files.
	ReadDir(name string) ([]fs.DirEntry, error)
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
func (OS) OpenRW(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, err // a nil File, not one holding a nil *os.File
	}
	return f, nil
}

// ReadDir lists a directory.
func (OS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }

// Discover finds the hierarchies in /proc/self/mountinfo and the caller's
// cgroups in /proc/self/cgroup.
func Discover() (Roots, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return Roots{}, err
	}
	r := parseMountinfo(data)
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return Roots{}, err
	}
	r.SelfV2, r.SelfV1Memory = parseSelf(self)
	return r, nil
}

// parseSelf reads cgroups(7)'s /proc/PID/cgroup, lines of
// "ID:CONTROLLERS:PATH": the unified hierarchy's has ID 0 and no
// controllers, a v1 hierarchy's names its controllers. A path that is
// not absolute (a cgroup outside the reader's cgroup namespace shows as
// "/.." and up) is not one the caller can make a child in: it is taken
// as the root.
func parseSelf(data []byte) (v2, v1Memory string) {
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		path := f[2]
		if !strings.HasPrefix(path, "/") || strings.HasPrefix(path, "/..") {
			path = "/"
		}
		switch {
		case f[0] == "0" && f[1] == "":
			v2 = path
		case hasWord([]byte(strings.ReplaceAll(f[1], ",", " ")), "memory"):
			v1Memory = path
		}
	}
	return v2, v1Memory
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
				switch {
				case o == "memory" && r.V1Memory == "":
					r.V1Memory = f[4]
				case o == "blkio" && r.V1Blkio == "":
					r.V1Blkio = f[4]
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
	root    string // the parent cgroup, where Remove moves tasks back
	blkio   string // v1: the blkio hierarchy's root, for ThrottleWrites
	fs      FS
	peak    File // v2: memory.peak, open since ResetPeak
	tries   int  // Remove's rounds; 0: removeTries

	// enabled are the v2 controllers New or ThrottleWrites enabled in
	// a parent's cgroup.subtree_control, which Remove disables again;
	// throttled are the devices whose v1 blkio rules ThrottleWrites set
	// at the root, which Remove clears.
	enabled   []enabled
	throttled []string
}

// enabled is a controller enabled in dir's cgroup.subtree_control, and
// the child cgroups dir had then.
type enabled struct {
	dir, controller string
	children        []string
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

// New makes the cgroup name under the caller's own cgroup (r.SelfV2,
// r.SelfV1Memory) in the hierarchy that has the memory controller, v2
// first, limited to limit bytes of memory.
//
// On v2 a cgroup's children get the memory controller only when it is in
// the parent's cgroup.subtree_control, and a parent other than the root
// that has processes of its own (the caller's, typically) may not enable
// it there. So New takes the nearest of the caller's cgroup and its
// ancestors that already hands memory down; failing that it enables
// memory in the caller's cgroup, and failing that in the root, and
// Remove disables it again.
func New(fsys FS, r Roots, name string, limit int64) (*Cgroup, error) {
	if strings.ContainsRune(name, '/') || name == "" || name == "." || name == ".." {
		return nil, fmt.Errorf("cgroup: bad name %q", name)
	}
	root, v, err := Choose(fsys, r)
	if err != nil {
		return nil, err
	}
	c := &Cgroup{Version: v, blkio: r.V1Blkio, fs: fsys}
	var limitFile string
	switch v {
	case V2:
		if c.root, err = v2Parent(fsys, root, r.SelfV2, &c.enabled); err != nil {
			return nil, err
		}
		limitFile = "memory.max"
	default:
		c.root = own(fsys, root, r.SelfV1Memory)
		limitFile = "memory.limit_in_bytes"
	}
	c.Dir = filepath.Join(c.root, name)
	if err := fsys.Mkdir(c.Dir); err != nil {
		c.disable()
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	if err := c.write(limitFile, strconv.FormatInt(limit, 10)); err != nil {
		fsys.Rmdir(c.Dir)
		c.disable()
		return nil, err
	}
	return c, nil
}

// own returns the caller's cgroup self (a path in the hierarchy, "/" or
// empty for its root) under the hierarchy mounted at root; the root
// where that is not a cgroup here (a container's cgroup filesystem,
// mounted from its own cgroup down, shows that cgroup as its root).
func own(fsys FS, root, self string) string {
	dir := filepath.Join(root, filepath.Clean("/"+self))
	if _, err := fsys.ReadFile(filepath.Join(dir, "cgroup.procs")); err != nil {
		return root
	}
	return dir
}

// v2Parent returns the cgroup to make the memory cgroup in (see New),
// appending to enabled the directory whose subtree_control it enabled
// memory in, if any.
func v2Parent(fsys FS, root, self string, done *[]enabled) (string, error) {
	ownDir := own(fsys, root, self)
	for dir := ownDir; ; dir = filepath.Dir(dir) {
		if sub, err := fsys.ReadFile(filepath.Join(dir, "cgroup.subtree_control")); err == nil && hasWord(sub, "memory") {
			return dir, nil
		}
		if dir == root || len(dir) < len(root) {
			break
		}
	}
	var err error
	for _, dir := range []string{ownDir, root} {
		var e enabled
		if e, err = enable(fsys, dir, "memory"); err == nil {
			*done = append(*done, e)
			return dir, nil
		}
		if dir == root {
			break
		}
	}
	return "", fmt.Errorf("cgroup: enabling the v2 memory controller: %w", err)
}

// enable writes +controller into dir's cgroup.subtree_control, and
// returns what disable needs to take it back.
func enable(fsys FS, dir, controller string) (enabled, error) {
	e := enabled{dir: dir, controller: controller, children: children(fsys, dir)}
	return e, fsys.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+controller))
}

// disable takes back what New and ThrottleWrites enabled, where no other
// cgroup has come to depend on it: a controller stays enabled in a parent
// that has a child cgroup it did not have when the controller was enabled
// (another run's, made meanwhile, which disabling it would take the
// controller from), and is disabled otherwise; a v1 throttle rule always
// goes (it names a device only this run made).
func (c *Cgroup) disable() error {
	var errs []error
	if err := c.Unthrottle(); err != nil {
		errs = append(errs, err)
	}
	for i := len(c.enabled) - 1; i >= 0; i-- {
		e := c.enabled[i]
		if newChild(children(c.fs, e.dir), e.children) {
			continue
		}
		if err := c.fs.WriteFile(filepath.Join(e.dir, "cgroup.subtree_control"), []byte("-"+e.controller)); err != nil {
			errs = append(errs, fmt.Errorf("cgroup: disabling %s in %s: %w", e.controller, e.dir, err))
		}
	}
	c.enabled = nil
	return errors.Join(errs...)
}

// children returns the names of the cgroup dir's child cgroups, its
// subdirectories.
func children(fsys FS, dir string) []string {
	ents, _ := fsys.ReadDir(dir)
	var names []string
	for _, e := range ents {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names
}

// newChild reports whether now names a child not in before.
func newChild(now, before []string) bool {
	for _, n := range now {
		if !slices.Contains(before, n) {
			return true
		}
	}
	return false
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
// and the peak; its Remove would not take back what New enabled.
func Open(fsys FS, dir string, v Version) *Cgroup {
	return &Cgroup{Dir: dir, Version: v, root: filepath.Dir(dir), fs: fsys}
}

// Join moves the process pid (all its threads) into the cgroup.
func (c *Cgroup) Join(pid int) error { return c.write("cgroup.procs", strconv.Itoa(pid)) }

// Procs returns the path of the cgroup's cgroup.procs, which a process
// writes its pid to to join it (a shell before it execs a command).
func (c *Cgroup) Procs() string { return filepath.Join(c.Dir, "cgroup.procs") }

// Ref names the cgroup for a child process, "v1:DIR" or "v2:DIR", which
// OpenRef opens there.
func (c *Cgroup) Ref() string { return fmt.Sprintf("v%d:%s", c.Version, c.Dir) }

// OpenRef opens the cgroup ref (Ref) names, as Open does.
func OpenRef(fsys FS, ref string) (*Cgroup, error) {
	v, dir, ok := strings.Cut(ref, ":")
	switch {
	case ok && v == "v1":
		return Open(fsys, dir, V1), nil
	case ok && v == "v2":
		return Open(fsys, dir, V2), nil
	}
	return nil, fmt.Errorf("cgroup: %q names no cgroup", ref)
}

// SetLimit changes the memory limit to limit bytes; -1 lifts it.
func (c *Cgroup) SetLimit(limit int64) error {
	v := strconv.FormatInt(limit, 10)
	if c.Version == V2 {
		if limit < 0 {
			v = "max"
		}
		return c.write("memory.max", v)
	}
	return c.write("memory.limit_in_bytes", v)
}

// PageCache returns the page cache charged to the cgroup: memory.stat's
// cache (v1) or file (v2).
func (c *Cgroup) PageCache() (int64, error) {
	key := "cache "
	if c.Version == V2 {
		key = "file "
	}
	data, err := c.fs.ReadFile(filepath.Join(c.Dir, "memory.stat"))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("cgroup: no %q in memory.stat", strings.TrimSpace(key))
}

// Parent returns where New makes its cgroups on r: the caller's own
// cgroup on v1; on v2 the nearest of it and its ancestors that hands the
// memory controller down, else the caller's own, where New would enable
// it.
func Parent(fsys FS, r Roots) (string, error) {
	root, v, err := Choose(fsys, r)
	switch {
	case err != nil:
		return "", err
	case v == V1:
		return own(fsys, root, r.SelfV1Memory), nil
	}
	ownDir := own(fsys, root, r.SelfV2)
	for dir := ownDir; len(dir) >= len(root); dir = filepath.Dir(dir) {
		if sub, err := fsys.ReadFile(filepath.Join(dir, "cgroup.subtree_control")); err == nil && hasWord(sub, "memory") {
			return dir, nil
		}
		if dir == root {
			break
		}
	}
	return ownDir, nil
}

// Limit returns the memory limit in bytes.
func (c *Cgroup) Limit() (int64, error) {
	file := "memory.max"
	if c.Version == V1 {
		file = "memory.limit_in_bytes"
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

// ErrNoThrottle reports that the hierarchies offer no way to limit a
// device's writes: neither v1's blkio controller nor v2's io controller.
var ErrNoThrottle = errors.New("cgroup: no write throttle (neither a v1 blkio hierarchy nor the v2 io controller)")

// v1WriteBps is the v1 blkio file of write limits, lines of "MAJ:MIN
// BYTES_PER_SECOND"; a limit of 0 removes a device's rule.
const v1WriteBps = "blkio.throttle.write_bps_device"

// ThrottleWrites limits the writes to the block device dev ("MAJ:MIN") to
// bps bytes a second, for the cgroup's tasks and for the writeback of the
// pages they dirty, until Remove.
//
// On v1 the rule goes on the blkio hierarchy's root: v1 writeback is
// issued by the kernel's flusher threads, which run in the root cgroup,
// so a rule on the cgroup alone would limit its direct writes and not its
// buffered ones. The rule names the device, so it binds nothing else. On
// v2 it is the cgroup's io.max, which binds its writeback too (the
// flusher charges a page's write to the cgroup that dirtied it), with the
// io controller enabled in the parent if it was not.
func (c *Cgroup) ThrottleWrites(dev string, bps int64) error {
	if bps <= 0 {
		return fmt.Errorf("cgroup: write limit %d: want a positive rate", bps)
	}
	if c.Version == V1 {
		if c.blkio == "" {
			return ErrNoThrottle
		}
		rule := fmt.Sprintf("%s %d", dev, bps)
		if err := c.fs.WriteFile(filepath.Join(c.blkio, v1WriteBps), []byte(rule)); err != nil {
			return fmt.Errorf("cgroup: writing %q to %s: %w", rule, v1WriteBps, err)
		}
		c.throttled = append(c.throttled, dev)
		return nil
	}
	if sub, err := c.fs.ReadFile(filepath.Join(c.root, "cgroup.subtree_control")); err != nil {
		return err
	} else if !hasWord(sub, "io") {
		if ctl, err := c.fs.ReadFile(filepath.Join(c.root, "cgroup.controllers")); err != nil || !hasWord(ctl, "io") {
			return ErrNoThrottle
		}
		e, err := enable(c.fs, c.root, "io")
		if err != nil {
			return fmt.Errorf("cgroup: enabling the v2 io controller: %w", err)
		}
		c.enabled = append(c.enabled, e)
	}
	return c.write("io.max", fmt.Sprintf("%s wbps=%d", dev, bps))
}

// Unthrottle clears the v1 write limits ThrottleWrites set, which name
// their devices at the blkio root, where they outlive the cgroup; Remove
// calls it too. A v2 limit goes with its cgroup.
func (c *Cgroup) Unthrottle() error {
	var errs []error
	for _, dev := range c.throttled {
		if err := c.fs.WriteFile(filepath.Join(c.blkio, v1WriteBps), []byte(dev+" 0")); err != nil {
			errs = append(errs, fmt.Errorf("cgroup: clearing the write limit of %s: %w", dev, err))
		}
	}
	c.throttled = nil
	return errors.Join(errs...)
}

// CanThrottle reports, as ErrNoThrottle, whether the hierarchy New would
// use offers no way to limit a device's writes.
func CanThrottle(fsys FS, r Roots) error {
	_, v, err := Choose(fsys, r)
	switch {
	case err != nil:
		return err
	case v == V1 && r.V1Blkio == "":
		return ErrNoThrottle
	case v == V2:
		if ctl, err := fsys.ReadFile(filepath.Join(r.V2, "cgroup.controllers")); err != nil || !hasWord(ctl, "io") {
			return ErrNoThrottle
		}
	}
	return nil
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

// Remove moves any task left in the cgroup back to its parent, removes
// the cgroup, and takes back what New and ThrottleWrites enabled. A cgroup
// already gone is not an error.
func (c *Cgroup) Remove() error {
	c.closePeak()
	err := c.rmdir()
	if derr := c.disable(); err == nil {
		err = derr
	}
	return err
}

func (c *Cgroup) rmdir() error {
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
