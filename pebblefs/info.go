//go:build unix

package pebblefs

import (
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// fileID names a file by its inode, whatever its name: a reader finds
// the live writer of a file opened through a link or after a rename.
type fileID struct{ dev, ino uint64 }

// idOf returns fi's inode, or the zero fileID when fi has none.
func idOf(fi vfs.FileInfo) fileID {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino}
}

// sizedInfo is a FileInfo whose size is the file's logical size (what
// Pebble wrote), not the size on disk, which runs ahead of it by the
// padded tail of an O_DIRECT write and behind it by what is still
// buffered.
type sizedInfo struct {
	vfs.FileInfo
	size int64
}

func (fi sizedInfo) Size() int64 { return fi.size }
