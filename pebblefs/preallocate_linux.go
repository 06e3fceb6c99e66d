package pebblefs

import (
	"errors"

	"golang.org/x/sys/unix"
)

// preallocate reserves length bytes at off in the file fd with
// fallocate(FALLOC_FL_KEEP_SIZE). A filesystem without fallocate is not
// an error: preallocation is advice.
func preallocate(fd uintptr, off, length int64) error {
	err := unix.Fallocate(int(fd), unix.FALLOC_FL_KEEP_SIZE, off, length)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return nil
	}
	return err
}
