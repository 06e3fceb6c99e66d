package testenv

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// ReadOnlyDir returns a new directory under dir that refuses file creation,
// and the error creating a file in it must match. Root writes wherever
// permissions say no, so as root it is a read-only tmpfs mount (EROFS),
// unmounted when t ends; otherwise a 0555 directory (EACCES).
func ReadOnlyDir(t testing.TB, dir string) (string, error) {
	t.Helper()
	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o755); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if os.Geteuid() != 0 {
		if err := os.Chmod(ro, 0o555); err != nil {
			t.Fatalf("testenv: %v", err)
		}
		t.Cleanup(func() { os.Chmod(ro, 0o755) })
		return ro, fs.ErrPermission
	}
	if err := unix.Mount("tmpfs", ro, "tmpfs", unix.MS_RDONLY, ""); err != nil {
		t.Skipf("cannot mount a read-only tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(ro, 0) })
	return ro, unix.EROFS
}
