package benchkit

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// A LoopDevice is an ext4 filesystem on a loop device over a file, made
// for one measurement and removed after it: a disk of its own (dio-check
// pressure -throttle limits its writes), the same on any machine with
// loop devices.
type LoopDevice struct {
	img    string   // the backing file
	dev    string   // /dev/loopN
	MajMin string   // the device's number, "MAJ:MIN", for a throttle rule
	Mnt    string   // where the filesystem is mounted
	loop   *os.File // the loop device, open until it is detached
	// Unthrottle, once the caller has limited the device's writes,
	// takes the limit off; Remove calls it before it detaches the
	// device, which a later user of the same number must find free.
	Unthrottle func() error
}

// loopTries bounds MakeLoopDevice's attempts at a free loop device that
// another process may take between LOOP_CTL_GET_FREE and LOOP_CONFIGURE.
const loopTries = 10

// MakeLoopDevice makes a file of size bytes in dir, a loop device over it
// (with direct I/O, so that the backing file's page cache does not
// double the device's), an ext4 filesystem on it, and mounts it on a new
// directory in dir. On an error it removes what it made.
func MakeLoopDevice(dir string, size int64) (d *LoopDevice, err error) {
	d = &LoopDevice{}
	defer func() {
		if err != nil {
			d.Remove()
		}
	}()
	img, err := os.CreateTemp(dir, ".dio-loop-*.img")
	if err != nil {
		return nil, err
	}
	d.img = img.Name()
	defer img.Close()
	if err := img.Truncate(size); err != nil {
		return nil, err
	}
	if err := d.attach(img); err != nil {
		return nil, err
	}
	// Initialise the inode tables and the journal now: ext4's lazy
	// initialisation would write them during the measurement, through
	// the throttle. A few thousand inodes are plenty and keep the
	// tables small.
	out, err := exec.Command("mkfs.ext4", "-q", "-F", "-N", "4096", "-E", "lazy_itable_init=0,lazy_journal_init=0", d.dev).CombinedOutput()
	if err != nil {
		// One line: the reason fits a one-line error.
		return nil, fmt.Errorf("mkfs.ext4 %s: %w: %s", d.dev, err, strings.Join(strings.Fields(string(out)), " "))
	}
	if d.Mnt, err = os.MkdirTemp(dir, ".dio-loop-mnt-"); err != nil {
		return nil, err
	}
	// discard hands the blocks of removed files back to the backing
	// file (a hole punched in it), which so stays about as large as
	// what the filesystem holds.
	if err := unix.Mount(d.dev, d.Mnt, "ext4", 0, "discard"); err != nil {
		os.Remove(d.Mnt)
		d.Mnt = ""
		return nil, fmt.Errorf("mounting %s: %w", d.dev, err)
	}
	return d, nil
}

// attach binds a free loop device to img.
func (d *LoopDevice) attach(img *os.File) error {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("no loop devices: %w", err)
	}
	defer ctl.Close()
	for try := 0; ; try++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return fmt.Errorf("no free loop device: %w", err)
		}
		dev := fmt.Sprintf("/dev/loop%d", n)
		f, err := os.OpenFile(dev, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		// Autoclear detaches the device when its last user closes it:
		// a process killed outright leaves the mount, but no device
		// behind it once that is unmounted.
		cfg := unix.LoopConfig{Fd: uint32(img.Fd()), Info: unix.LoopInfo64{Flags: unix.LO_FLAGS_AUTOCLEAR | unix.LO_FLAGS_DIRECT_IO}}
		copy(cfg.Info.File_name[:], d.img)
		err = unix.IoctlLoopConfigure(int(f.Fd()), &cfg)
		if errors.Is(err, unix.EBUSY) && try < loopTries {
			f.Close() // taken by another process meanwhile
			continue
		}
		if err != nil {
			f.Close()
			return fmt.Errorf("configuring %s: %w", dev, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			d.loop, d.dev = f, dev
			return err
		}
		d.loop, d.dev = f, dev
		d.MajMin = fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
		return nil
	}
}

// umountTries bounds remove's attempts at unmounting, 50 ms apart: a
// process killed a moment ago may still hold a file there.
const umountTries = 100

// Remove takes the throttle off, unmounts the filesystem, detaches the
// loop device and removes its file and the mount point, as far as they
// were made; it can be called again.
func (d *LoopDevice) Remove() error {
	var errs []error
	if d.Unthrottle != nil {
		if err := d.Unthrottle(); err != nil {
			errs = append(errs, err)
		}
		d.Unthrottle = nil
	}
	if d.Mnt != "" {
		var err error
		for range umountTries {
			if err = unix.Unmount(d.Mnt, 0); !errors.Is(err, unix.EBUSY) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if errors.Is(err, unix.EBUSY) {
			// Detached from the tree now, the filesystem goes, and
			// with it (autoclear) the device, when its last file
			// closes.
			err = unix.Unmount(d.Mnt, unix.MNT_DETACH)
		}
		if err != nil && !errors.Is(err, unix.EINVAL) { // EINVAL: not mounted
			errs = append(errs, fmt.Errorf("unmounting %s: %w", d.Mnt, err))
		}
		if err := os.Remove(d.Mnt); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		d.Mnt = ""
	}
	if d.loop != nil {
		// ENXIO: autoclear detached it already.
		if err := unix.IoctlSetInt(int(d.loop.Fd()), unix.LOOP_CLR_FD, 0); err != nil && !errors.Is(err, unix.ENXIO) {
			errs = append(errs, fmt.Errorf("detaching %s: %w", d.dev, err))
		}
		d.loop.Close()
		d.loop = nil
	}
	if d.img != "" {
		if err := os.Remove(d.img); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		d.img = ""
	}
	return errors.Join(errs...)
}

// String describes the device for a table's header.
func (d *LoopDevice) String() string {
	return fmt.Sprintf("%s (%s) over %s", d.dev, d.MajMin, filepath.Base(d.img))
}
