package reliability

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/internal/testenv"
)

// smallDisk mounts a fresh 24 MiB ext4 on a loop device and returns its
// mountpoint; everything is undone when t ends.
func smallDisk(t *testing.T) string {
	t.Helper()
	return loopDisk(t, "ext4", 24<<20)
}

// loopDisk makes a filesystem of type fstype (ext4, xfs or btrfs) and size
// bytes on a loop device, mounts it and returns its mountpoint and
// device; everything is undone when t ends. It skips t without root or
// the tools.
func loopDisk(t *testing.T, fstype string, size int64) string {
	t.Helper()
	mnt, _ := loopDev(t, fstype, size)
	return mnt
}

func loopDev(t *testing.T, fstype string, size int64) (mnt, dev string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small disk needs root")
	}
	mkfs := map[string][]string{
		"ext4":  {"mkfs.ext4", "-q", "-F"},
		"xfs":   {"mkfs.xfs", "-q", "-f"},
		"btrfs": {"mkfs.btrfs", "-q", "-f"},
	}[fstype]
	require.NotNil(t, mkfs, "no mkfs for %s", fstype)
	for _, tool := range []string{"losetup", mkfs[0]} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found", tool)
		}
	}
	dir := t.TempDir()
	img := filepath.Join(dir, "disk.img")
	require.NoError(t, os.WriteFile(img, nil, 0o600))
	require.NoError(t, os.Truncate(img, size))
	out, err := exec.Command("losetup", "--find", "--show", img).Output()
	if err != nil {
		t.Skipf("losetup: %v", err)
	}
	dev = string(bytes.TrimSpace(out))
	t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
	if out, err := exec.Command(mkfs[0], append(mkfs[1:], dev)...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", mkfs[0], err, out)
	}
	mnt = filepath.Join(dir, "mnt")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	require.NoError(t, unix.Mount(dev, mnt, fstype, 0, ""))
	t.Cleanup(func() { unmount(t, mnt) })
	return mnt, dev
}

// unmount unmounts mnt, retrying while a file the test left open keeps it
// busy (a failed test may not have closed its writer), and detaches it
// lazily as a last resort, so that no mount or loop device outlives the
// test; the loop device goes with it (losetup -d set autoclear).
func unmount(t *testing.T, mnt string) {
	var err error
	for range 20 {
		if err = unix.Unmount(mnt, 0); err == nil || err == unix.EINVAL {
			return // EINVAL: not mounted (the test unmounted it)
		}
		runtime.GC() // an unclosed writer's cleanup closes its file
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("unmounting %s: %v; detaching it lazily", mnt, err)
	unix.Unmount(mnt, unix.MNT_DETACH)
}

// TestDiskFull fills a real small disk through a blob writer: the error is
// ENOSPC, later writes are refused, Close returns, and every blob synced
// before reads back.
func TestDiskFull(t *testing.T) {
	if fs := testenv.FS(); fs != "" && fs != "ext4" {
		t.Skip("runs in the default leg and the ext4 leg; the disk it fills is its own")
	}
	mnt := smallDisk(t)
	path := filepath.Join(mnt, "full.blob")
	w, err := blobio.Create(path, nil)
	require.NoError(t, err)
	t.Logf("mode %v", w.Mode())
	var synced [][]byte
	var offs []int64
	var pending [][]byte
	var pendingOffs []int64
	var failure error
	for i := 0; failure == nil; i++ {
		v := bytes.Repeat([]byte{byte(i)}, 4000+i%100)
		off, err := w.WriteBlob(v)
		if err != nil {
			failure = err
			break
		}
		pending, pendingOffs = append(pending, v), append(pendingOffs, off)
		if i%50 == 49 {
			if failure = w.Sync(); failure == nil {
				synced, offs = append(synced, pending...), append(offs, pendingOffs...)
				pending, pendingOffs = nil, nil
			}
		}
		require.Less(t, i, 100000, "the disk never filled")
	}
	require.True(t, errors.Is(failure, syscall.ENOSPC), "want ENOSPC, got %v", failure)
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(mnt, &st))
	assert.Less(t, int64(st.Bavail)*st.Bsize, int64(1<<20), "ENOSPC while the disk still had room")
	_, err = w.WriteBlob([]byte("more"))
	assert.ErrorIs(t, err, syscall.ENOSPC)
	assert.Error(t, w.Close())

	r, err := blobio.Open(path, nil)
	require.NoError(t, err)
	defer r.Close()
	for i, off := range offs {
		got, err := r.ReadBlob(off, nil)
		require.NoError(t, err)
		require.True(t, bytes.Equal(synced[i], got), "synced blob %d lost", i)
	}
	t.Logf("disk full after %d synced blobs (%d MiB); all read back", len(synced), len(synced)*4000>>20)
}
