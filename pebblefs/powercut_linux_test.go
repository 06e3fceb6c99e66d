package pebblefs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/dio-storage/dio/internal/testenv"
	"golang.org/x/sys/unix"
)

// The power cut: XFS_IOC_GOINGDOWN, which ext4 takes too, with
// XFS_FSOP_GOING_FLAGS_NOLOGFLUSH: the filesystem stops at once and its
// journal keeps only what was committed, as if the power went (xfs_io -x
// -c "shutdown").
const (
	iocGoingDown        = 0x8004587d // _IOR('X', 125, __u32), linux/fs/xfs/libxfs/xfs_fs.h
	goingDownNoLogFlush = 0x2
)

// powerCutsEnv sets how many cuts TestPowerCut makes per filesystem.
const powerCutsEnv = "PEBBLEFS_POWERCUTS"

// TestPowerCut writes to Pebble on pebblefs from a child, with
// pebble.Sync, on a small ext4 and xfs of its own, and cuts the power
// under it; after remounting, Pebble opens and holds every batch
// acknowledged before the cut. Needs root, losetup and mkfs.
func TestPowerCut(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	if fs := testenv.FS(); fs != "" && fs != "xfs" {
		t.Skipf("makes its own ext4 and xfs: the matrix runs it on its xfs leg, not on %s", fs)
	}
	cuts := int(envInt(t, powerCutsEnv, 2))
	for _, fstype := range []string{"ext4", "xfs"} {
		t.Run(fstype, func(t *testing.T) {
			mnt, dev := loopMount(t, fstype, 512<<20)
			dir := filepath.Join(mnt, "db")
			acked := make([][crashWriters]int, cuts)
			for round := range cuts {
				acked[round] = writeAndKill(t, dir, round, func() {
					d, err := os.Open(mnt)
					if err != nil {
						t.Fatal(err)
					}
					defer d.Close()
					if err := unix.IoctlSetPointerInt(int(d.Fd()), iocGoingDown, goingDownNoLogFlush); err != nil {
						t.Fatalf("shutdown: %v", err)
					}
				})
				if err := unmount(mnt); err != nil {
					t.Fatal(err)
				}
				if err := unix.Mount(dev, mnt, fstype, 0, ""); err != nil {
					t.Fatalf("remounting after the cut: %v", err)
				}
				checkAcked(t, dir, acked[:round+1])
				t.Logf("cut %d: after %v batches; all acknowledged batches there", round, acked[round])
			}
		})
	}
}

// loopMount makes a filesystem of fstype on a loop device over a sparse
// file and mounts it; cleanup unmounts it and detaches the device.
func loopMount(t *testing.T, fstype string, size int64) (mnt, dev string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a filesystem needs root")
	}
	for _, tool := range []string{"losetup", "mkfs." + fstype} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found", tool)
		}
	}
	tmp := t.TempDir()
	img := filepath.Join(tmp, "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", img).Output()
	if err != nil {
		t.Skipf("losetup: %v", err)
	}
	dev = string(bytes.TrimSpace(out))
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", dev).Run() })
	force := map[string]string{"ext4": "-F", "xfs": "-f"}[fstype]
	if out, err := exec.Command("mkfs."+fstype, "-q", force, dev).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.%s: %v: %s", fstype, err, out)
	}
	mnt = filepath.Join(tmp, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(dev, mnt, fstype, 0, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unmount(mnt); err != nil {
			t.Error(err)
		}
	})
	return mnt, dev
}

// unmount unmounts mnt, waiting for files a killed child held to be
// released, and detaches it lazily as a last resort so that no mount
// outlives the test. An mnt not mounted is not an error.
func unmount(mnt string) error {
	var err error
	for range 50 {
		if err = unix.Unmount(mnt, 0); err == nil || err == unix.EINVAL {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = unix.Unmount(mnt, unix.MNT_DETACH)
	return err
}
