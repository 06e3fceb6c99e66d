package crashtest

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// loopTries bounds attach's attempts at a free loop device that another
// process may take between LOOP_CTL_GET_FREE and LOOP_CONFIGURE.
const loopTries = 20

// attachLoop binds a free loop device (found as losetup --find does, never
// a fixed number) to the file at path, with the given logical sector size
// and the loop driver's direct I/O off, and returns its path.
func attachLoop(path string, sector int) (string, error) {
	f, err := openFile(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer ctl.Close()
	for try := 0; ; try++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", fmt.Errorf("%w: no free loop device: %v", ErrUnavailable, err)
		}
		dev := fmt.Sprintf("/dev/loop%d", n)
		lf, err := os.OpenFile(dev, os.O_RDWR, 0)
		if err != nil {
			return "", err
		}
		cfg := unix.LoopConfig{Fd: uint32(f.Fd()), Size: uint32(sector)}
		copy(cfg.Info.File_name[:], path)
		err = unix.IoctlLoopConfigure(int(lf.Fd()), &cfg)
		lf.Close()
		if errors.Is(err, unix.EBUSY) && try < loopTries {
			continue // taken by another process meanwhile
		}
		if err != nil {
			return "", fmt.Errorf("configuring %s: %w", dev, err)
		}
		return dev, nil
	}
}

// detachLoop unbinds a loop device; if it is still in use the kernel
// detaches it when its last user lets go.
func detachLoop(dev string) error {
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	err = unix.IoctlSetInt(int(f.Fd()), unix.LOOP_CLR_FD, 0)
	if errors.Is(err, unix.ENXIO) {
		return nil // detached already
	}
	return err
}

// loopDirectIO reads whether the loop driver does direct I/O to its file
// (sysfs loop/dio).
func loopDirectIO(dev string) (bool, error) {
	name := strings.TrimPrefix(dev, "/dev/")
	b, err := os.ReadFile("/sys/block/" + name + "/loop/dio")
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(string(b)) == "1", nil
}

// dropCache writes out and drops the block device's page cache (BLKFLSBUF),
// so that the next mount reads the disk, not what an earlier one cached.
func dropCache(dev string) error {
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.IoctlSetInt(int(f.Fd()), unix.BLKFLSBUF, 0)
}
