package fallback

import (
	"fmt"
	"os"
	"syscall"

	"github.com/dio-storage/dio/direct"
)

// RefuseDirect makes Open's O_DIRECT attempt fail as ramfs's does (EINVAL
// at open, nothing created), for the external tests, until the returned
// function restores it.
func RefuseDirect() (restore func()) {
	openDirect = func(name string, _ int, _ os.FileMode) (*direct.File, error) {
		return nil, &os.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: %w", direct.ErrNotSupported, syscall.EINVAL)}
	}
	return func() { openDirect = direct.Open }
}
