package reliability

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/internal/testenv"
)

// The shutdown ioctl xfs_io -x -c shutdown makes (xfs_fs.h; ext4 takes
// the same number as EXT4_IOC_SHUTDOWN): the filesystem stops at once,
// and with NOLOGFLUSH what the journal had not written is lost, as in a
// power cut.
const (
	xfsIocGoingDown     = 0x8004587d // _IOR('X', 125, __u32)
	goingDownNoLogFlush = 0x2        // XFS_FSOP_GOING_FLAGS_NOLOGFLUSH
)

// TestPowerCut writes, Syncs, writes more, makes the journal commit the
// file's grown size (another file's fsync does), then cuts the power with
// a shutdown that drops the unwritten journal. After a remount the file
// exists (Create fsynced the directory), every synced blob reads back, and
// neither scan, unbounded or bounded by Synced, returns a phantom record.
func TestPowerCut(t *testing.T) {
	fs := testenv.FS()
	if fs != "ext4" && fs != "xfs" {
		t.Skip("runs on the ext4 and xfs legs, on a disk of its own")
	}
	mnt, dev := loopDev(t, fs, 320<<20)
	path := filepath.Join(mnt, "cut.blob")
	w, err := blobio.Create(path, &blobio.Options{BufferSize: 64 << 10})
	require.NoError(t, err)
	const syncedBlobs = 3000
	n := 0
	for ; n < syncedBlobs; n++ {
		_, err := w.WriteBlob(crashBlob(n))
		require.NoError(t, err)
	}
	require.NoError(t, w.Sync())
	synced := w.Synced()
	// More than the ring holds, so that writes reach the disk and the
	// file is grown ahead of them.
	for start := w.Size(); w.Size() < start+4<<20; n++ {
		_, err := w.WriteBlob(crashBlob(n))
		require.NoError(t, err)
	}
	other, err := os.Create(filepath.Join(mnt, "other"))
	require.NoError(t, err)
	_, err = other.Write([]byte("forces the journal"))
	require.NoError(t, err)
	require.NoError(t, other.Sync())
	require.NoError(t, other.Close())

	d, err := os.Open(mnt)
	require.NoError(t, err)
	err = unix.IoctlSetPointerInt(int(d.Fd()), xfsIocGoingDown, goingDownNoLogFlush)
	d.Close()
	require.NoError(t, err, "shutdown")
	w.Close() // fails on a dead filesystem; it must not hang
	require.NoError(t, unix.Unmount(mnt, 0))
	require.NoError(t, unix.Mount(dev, mnt, fs, 0, ""))

	st, err := os.Stat(path)
	require.NoError(t, err, "the file did not survive the power cut")
	t.Logf("%s: %d blobs (%d bytes) synced, %d written; after the cut the file is %d bytes", fs, syncedBlobs, synced, n, st.Size())
	unbounded := scanCrashed(t, path, nil, syncedBlobs, "unbounded")
	bounded := scanCrashed(t, path, &blobio.Options{Size: synced}, syncedBlobs, "bounded")
	t.Logf("unbounded: %d blobs, %d unsynced intact, %d phantom, %d torn (%v)", unbounded.blobs, unbounded.unsynced, unbounded.phantoms, unbounded.torn, unbounded.err)
	require.Zero(t, unbounded.phantoms, "phantom records after the power cut")
	require.Equal(t, syncedBlobs, bounded.blobs)
	require.NoError(t, bounded.err)
}
