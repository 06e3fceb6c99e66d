package ephemeral

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"

	"github.com/dio-storage/dio/fallback"
)

// createTemp opens an unnamed file in dir with O_TMPFILE, or a named one
// unlinked at once where the filesystem lacks O_TMPFILE.
func createTemp(dir string, p fallback.Policy) (fallback.File, error) {
	f, err := fallback.Open(dir, os.O_RDWR|unix.O_TMPFILE, 0o600, p)
	if err == nil || !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EISDIR) {
		return f, err
	}
	return createNamed(dir, p, 0, true)
}
