//go:build !windows

package appender

import "os"

// SyncDir fsyncs the directory dir, making the names in it durable: a new
// file's name is not made durable by the file's own fdatasync on every
// filesystem (ext4 without a journal, for one).
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
