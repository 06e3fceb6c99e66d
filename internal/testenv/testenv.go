// Package testenv tells dio's tests where to put their files and what the
// filesystem matrix expects of that place.
//
// The matrix (scripts/test-matrix.sh) mounts each filesystem and runs the
// tests with DIO_TEST_DIR pointing into it, DIO_TEST_FS naming the
// filesystem it mounted, and DIO_TEST_SECTOR the logical sector size of its
// loop device. Without them the tests use the system temporary directory
// and skip the expectations that belong to one filesystem.
//
// It is test support, not one of dio's layers: it imports the layers it
// helps test, and only test files import it, as layers_test.go at the
// module's root checks.
package testenv

import (
	"os"
	"strconv"
	"testing"

	"github.com/dio-storage/dio/direct"
)

// The environment variables the matrix sets.
const (
	DirEnv    = "DIO_TEST_DIR"
	FSEnv     = "DIO_TEST_FS"
	SectorEnv = "DIO_TEST_SECTOR"
)

// Dir returns a new empty directory for t on the filesystem under test,
// removed when t ends. When DIO_TEST_FS is set, Dir fails the test unless
// the directory really is on that filesystem, so a matrix leg cannot pass
// by testing the wrong disk.
func Dir(t testing.TB) string {
	t.Helper()
	root := os.Getenv(DirEnv)
	if root == "" {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp(root, "dio-test-")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("testenv: removing %s: %v", dir, err)
		}
	})
	if want := FS(); want != "" {
		if got, err := direct.Filesystem(dir); err != nil || got != want {
			t.Fatalf("testenv: %s is on %q (%v), the matrix expected %s", dir, got, err, want)
		}
	}
	return dir
}

// FS returns the filesystem the matrix mounted for this run, or "".
func FS() string { return os.Getenv(FSEnv) }

// Sector returns the logical sector size of the matrix's loop device, or 0.
func Sector() int {
	n, _ := strconv.Atoi(os.Getenv(SectorEnv))
	return n
}

// RejectsDirect reports whether the filesystem under test refuses O_DIRECT,
// as ramfs does.
func RejectsDirect() bool { return FS() == "ramfs" }
