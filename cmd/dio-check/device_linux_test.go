package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRAMDevice: a loop device over a tmpfs file is named as RAM-backed,
// with its direct I/O setting; a directory on tmpfs itself (no block
// device) or one that does not exist is not.
func TestRAMDevice(t *testing.T) {
	assert.Empty(t, ramDevice(filepath.Join(t.TempDir(), "missing")))
	assert.Empty(t, ramDevice("/proc"))
	if os.Geteuid() != 0 {
		t.Skip("a loop device needs root")
	}
	tmp := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", tmp).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", tmp).Run() })
	img := filepath.Join(tmp, "img")
	f, err := os.Create(img)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(32<<20))
	require.NoError(t, f.Close())
	out, err := exec.Command("losetup", "-f", "--show", "--direct-io=on", img).Output()
	if err != nil {
		t.Skipf("losetup: %v", err)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
	if out, err := exec.Command("mkfs.ext4", "-q", dev).CombinedOutput(); err != nil {
		t.Skipf("mkfs.ext4: %v: %s", err, out)
	}
	mnt := t.TempDir()
	require.NoError(t, exec.Command("mount", dev, mnt).Run())
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	got := ramDevice(mnt)
	assert.Contains(t, got, "RAM-backed device: a loop device over "+img+" in tmpfs")
	assert.Contains(t, got, "direct I/O on")
}
