//go:build unix && !linux

package pebblefs

// preallocate does nothing where fallocate(FALLOC_FL_KEEP_SIZE) does not
// exist (darwin, the BSDs), as Pebble's own vfs.Default does there:
// preallocation is advice.
func preallocate(fd uintptr, off, length int64) error { return nil }
