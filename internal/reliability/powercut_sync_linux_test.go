package reliability

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dio-storage/dio/blobio"
)

// TestPowerCutAfterSync cuts the power right after a Sync returned, with
// nothing else committing the journal: the file must still be at least
// Synced long and hold the synced bytes. Sync keeps the space grown ahead
// (no ftruncate), so the size it relies on is the one fallocate set, made
// durable by the fdatasync alone; the cases cut after a Sync that stayed
// inside the first reservation, and after one whose writes grew the file
// again. (Not on btrfs: it refuses the shutdown ioctl here, Linux 6.18;
// nothing is grown ahead there, the padded end a Sync writes extends the
// file and fdatasync logs the size with the data.)
func TestPowerCutAfterSync(t *testing.T) {
	for _, fs := range []string{"ext4", "xfs"} {
		for _, upTo := range []int64{300 << 10, 700 << 10, 3 << 20} {
			t.Run(fmt.Sprintf("%s/%d", fs, upTo), func(t *testing.T) {
				if _, err := os.Stat("/usr/sbin/mkfs." + fs); err != nil {
					t.Skip(err)
				}
				mnt, dev := loopDev(t, fs, 320<<20)
				path := filepath.Join(mnt, "cut.blob")
				w, err := blobio.Create(path, &blobio.Options{BufferSize: 64 << 10})
				require.NoError(t, err)
				var want []byte
				syncAt := int64(250 << 10)
				for i := 0; w.Size() < upTo; i++ {
					b := crashBlob(i)
					want, err = blobio.AppendHeader(want, len(b), blobio.None)
					require.NoError(t, err)
					want = append(want, b...)
					_, err = w.WriteBlob(b)
					require.NoError(t, err)
					if w.Size() >= syncAt {
						require.NoError(t, w.Sync())
						syncAt += 250 << 10
					}
				}
				require.NoError(t, w.Sync())
				synced := w.Synced()
				require.Equal(t, int64(len(want)), synced)

				d, err := os.Open(mnt)
				require.NoError(t, err)
				err = unix.IoctlSetPointerInt(int(d.Fd()), xfsIocGoingDown, goingDownNoLogFlush)
				d.Close()
				require.NoError(t, err, "shutdown")
				w.Close()
				require.NoError(t, unix.Unmount(mnt, 0))
				require.NoError(t, unix.Mount(dev, mnt, fs, 0, ""))
				defer unix.Unmount(mnt, 0)

				got, err := os.ReadFile(path)
				require.NoError(t, err)
				t.Logf("synced %d, file %d bytes after the cut", synced, len(got))
				require.GreaterOrEqual(t, int64(len(got)), synced, "the size does not cover the synced data")
				require.True(t, bytes.Equal(want, got[:synced]), "synced bytes differ")
			})
		}
	}
}
