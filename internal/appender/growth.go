package appender

import (
	"path/filepath"

	"github.com/dio-storage/dio/direct"
)

// copyOnWrite reports whether f is on a copy-on-write filesystem, where
// the Appender does not grow the file ahead of its writes. There a write
// never lands in the space reserved for it, and btrfs keeps a whole extent while any part of it is
// referenced: measured on a 1 GiB btrfs, 16 MiB of 4000-byte blobs with a
// Sync every 10 took 1,820 MiB, each Sync cutting a 1 MiB extent down to
// the 20-40 KiB it held, and a 64 MiB btrfs ran out of space after 5.5-8.2
// MB of writes. Without growing ahead the same file takes about its size.
func copyOnWrite(f File) bool {
	name := f.Name()
	fs, err := direct.Filesystem(name)
	if err != nil {
		// An unlinked temporary file: its directory says.
		fs, err = direct.Filesystem(filepath.Dir(name))
	}
	return err == nil && (fs == "btrfs" || fs == "bcachefs" || fs == "zfs")
}
