package crashtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// ErrUnavailable is returned where the machine cannot run the harness: not
// root, no /dev/fuse, no loop devices, no mkfs for the filesystem, or a
// loop driver that does not turn flushes into fsyncs of its file.
var ErrUnavailable = errors.New("crashtest: unavailable here")

// Available reports whether the harness can run here for fs, and if not,
// why (an error matching ErrUnavailable), without making anything.
func Available(f FS) error {
	if f.mkfs("x") == nil {
		return fmt.Errorf("%w: unknown filesystem %q", ErrInvalidConfig, f)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: needs root (mount, loop devices)", ErrUnavailable)
	}
	if err := unix.Access("/dev/fuse", unix.R_OK|unix.W_OK); err != nil {
		return fmt.Errorf("%w: /dev/fuse: %v", ErrUnavailable, err)
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return fmt.Errorf("%w: no loop devices: %v", ErrUnavailable, err)
	}
	if _, err := exec.LookPath("bash"); err != nil {
		return fmt.Errorf("%w: bash not found (the cleanup shell)", ErrUnavailable)
	}
	tool := f.mkfs("x").Args[0]
	if _, err := lookTool(tool); err != nil {
		return fmt.Errorf("%w: %s not found", ErrUnavailable, tool)
	}
	return nil
}

// lookTool finds a system tool, also in the sbin directories a non-login
// PATH may lack.
func lookTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// An env is what a harness run holds: a temporary directory, the disk
// server mounted in it, a tmpfs for the crash states' images, and the
// janitor that undoes all of it if the process dies.
type env struct {
	tmp string
	srv *server
	mem string // a tmpfs
	jan *janitor
	ids []int // the janitor's, for what close undoes itself
}

func newEnv() (e *env, err error) {
	jan, err := startJanitor()
	if err != nil {
		return nil, err
	}
	e = &env{jan: jan}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	if e.tmp, err = os.MkdirTemp("", "dio-crashtest-"); err != nil {
		return nil, err
	}
	jan.add("dir", e.tmp)
	disks, err := e.mkdir("disks")
	if err != nil {
		return nil, err
	}
	if e.srv, err = startServer(disks); err != nil {
		return nil, fmt.Errorf("%w: mounting the FUSE disk server: %v", ErrUnavailable, err)
	}
	e.ids = append(e.ids, jan.add("mount", disks))
	if e.mem, err = e.mkdir("mem"); err != nil {
		return nil, err
	}
	if err := unix.Mount("dio-crashtest", e.mem, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700"); err != nil {
		return nil, fmt.Errorf("%w: mounting a tmpfs: %v", ErrUnavailable, err)
	}
	e.ids = append(e.ids, jan.add("mount", e.mem))
	return e, nil
}

// mkdir makes a directory in the env's and tells the janitor of it.
func (e *env) mkdir(name string) (string, error) {
	var dir string
	var err error
	if name == "" {
		dir, err = os.MkdirTemp(e.tmp, "mnt-")
	} else {
		dir = filepath.Join(e.tmp, name)
		err = os.Mkdir(dir, 0o700)
	}
	if err != nil {
		return "", err
	}
	e.jan.add("dir", dir)
	return dir, nil
}

func (e *env) close() error {
	var errs []error
	if e.mem != "" {
		if err := unix.Unmount(e.mem, unix.MNT_DETACH); err != nil {
			errs = append(errs, err)
		}
	}
	if e.srv != nil {
		if err := e.srv.close(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, id := range e.ids {
		e.jan.forget(id)
	}
	if e.tmp != "" {
		if err := os.RemoveAll(e.tmp); err != nil {
			errs = append(errs, err)
		}
	}
	if err := e.jan.close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// A device is a disk with a loop device on it and a mount point for its
// filesystem. The disk is either served by the FUSE server (disk: the
// recording disk, a disk that fails requests) or a file on the env's tmpfs
// (file: a crash state's, whose reads need no round trip to this process).
type device struct {
	env    *env
	fs     FS
	size   int64
	disk   *diskFile
	file   *os.File
	dev    string
	mnt    string
	loopID int
	mntID  int // while mounted
}

// newDevice makes a disk of size bytes served by the FUSE server and
// attaches a loop device of the filesystem's sector size to it, after
// checking that the loop driver passes writes and flushes through to the
// server.
func (e *env) newDevice(f FS, size int64) (d *device, err error) {
	file, path, err := e.srv.add(size, f.Sector())
	if err != nil {
		return nil, err
	}
	d = &device{env: e, fs: f, size: size, disk: file}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	if err := d.attach(path); err != nil {
		return nil, err
	}
	if err := d.checkFlushes(); err != nil {
		return nil, err
	}
	return d, nil
}

// newMemDevice makes a disk of size bytes as a file on the env's tmpfs and
// attaches a loop device to it.
func (e *env) newMemDevice(f FS, size int64) (d *device, err error) {
	file, err := os.CreateTemp(e.mem, "state-*.img")
	if err != nil {
		return nil, err
	}
	d = &device{env: e, fs: f, size: size, file: file}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	if err := file.Truncate(size); err != nil {
		return nil, err
	}
	if err := d.attach(file.Name()); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *device) attach(path string) (err error) {
	if d.dev, err = attachLoop(path, d.fs.Sector()); err != nil {
		return err
	}
	d.loopID = d.env.jan.add("loop", d.dev)
	d.mnt, err = d.env.mkdir("")
	return err
}

// serve makes the device's disk hold img, and drops whatever the block
// device cached of the last one.
func (d *device) serve(img *image) error {
	if d.disk != nil {
		d.disk.serve(img)
	} else if err := img.writeTo(d.file); err != nil {
		return err
	}
	return dropCache(d.dev)
}

// kill makes a FUSE-served disk fail every request until it serves another
// image, so that a mount or check waiting on it returns; a tmpfs disk never
// waits.
func (d *device) kill() {
	if d.disk != nil {
		d.disk.kill()
	}
}

// checkFlushes writes a sector of the device with O_DIRECT and fsyncs it,
// and fails unless the server saw the write and then a flush: the harness
// rests on both reaching it in order.
func (d *device) checkFlushes() error {
	if on, err := loopDirectIO(d.dev); err != nil {
		return fmt.Errorf("%w: reading %s's direct I/O setting: %v", ErrUnavailable, d.dev, err)
	} else if on {
		return fmt.Errorf("%w: %s does direct I/O to its file, so its flushes would not reach the disk server as fsyncs", ErrUnavailable, d.dev)
	}
	rec, _ := d.disk.startRecording()
	defer d.disk.stopRecording()
	f, err := os.OpenFile(d.dev, os.O_RDWR|unix.O_DIRECT, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	buf, err := unix.Mmap(-1, 0, pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return err
	}
	defer unix.Munmap(buf)
	buf[0] = 1
	if _, err := f.WriteAt(buf, 0); err != nil {
		return fmt.Errorf("crashtest: writing %s: %w", d.dev, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("crashtest: flushing %s: %w", d.dev, err)
	}
	ev := rec.snapshot()
	var wrote, flushed bool
	for _, e := range ev {
		switch e.kind {
		case evWrite:
			wrote = wrote || e.off == 0
		case evFlush:
			flushed = flushed || wrote
		}
	}
	if !wrote || !flushed {
		return fmt.Errorf("%w: a write and fsync of %s reached the disk server as %d events (write seen: %v, flush after it: %v): the loop driver does not pass flushes through here", ErrUnavailable, d.dev, len(ev), wrote, flushed)
	}
	return nil
}

// mount mounts the device's filesystem on its mount point.
func (d *device) mount(opts string) error {
	if err := unix.Mount(d.dev, d.mnt, string(d.fs), 0, opts); err != nil {
		return fmt.Errorf("mount %s (%s) on %s: %w", d.dev, d.fs, d.mnt, err)
	}
	d.mntID = d.env.jan.add("mount", d.mnt)
	return nil
}

// umountTries bounds unmount's attempts, 10 ms apart, while a file there is
// still being closed.
const umountTries = 200

func (d *device) unmount() error {
	if d.mntID == 0 {
		return nil
	}
	var err error
	for range umountTries {
		if err = unix.Unmount(d.mnt, 0); !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if errors.Is(err, unix.EBUSY) {
		err = errors.Join(fmt.Errorf("unmount %s: %w (detached instead)", d.mnt, err), unix.Unmount(d.mnt, unix.MNT_DETACH))
	}
	d.env.jan.forget(d.mntID)
	d.mntID = 0
	return err
}

func (d *device) close() error {
	var errs []error
	if err := d.unmount(); err != nil {
		errs = append(errs, err)
	}
	if d.dev != "" {
		if err := detachLoop(d.dev); err != nil {
			errs = append(errs, err)
		}
		d.env.jan.forget(d.loopID)
		d.dev = ""
	}
	if d.file != nil {
		d.file.Close()
		os.Remove(d.file.Name())
		d.file = nil
	}
	return errors.Join(errs...)
}
