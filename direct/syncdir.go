//go:build !windows

package direct

import "os"

// SyncDir fsyncs the directory dir, making the names in it durable: a new
// file's name is not made durable by the file's own fdatasync on every
// filesystem (ext4 without a journal, for one). It is counted as an
// OpSyncDir, process wide and in m, and watched when m has a SlowPolicy;
// m may be nil.
func SyncDir(dir string, m *Meter) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	x := xfer{f: d, shard: pickShard(), meter: m}
	t := x.begin(OpSyncDir, 0, 0)
	err = d.Sync()
	x.end(t, PathStdFS, OpSyncDir, 0, err, 0)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
