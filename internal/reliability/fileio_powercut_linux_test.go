package reliability

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dio-storage/dio/fileio"
)

// TestFileioPowerCut cuts the power (the shutdown ioctl, dropping the
// unwritten journal) under a fileio.Writer, on a disk of its own: after a
// Sync with more written behind it, the file is at least Synced long and
// holds the synced bytes; after a Close, it is exactly Size long, so that
// an engine reading its footer from the end finds it (Close fdatasyncs
// the truncate that cut the padding and the space grown ahead).
func TestFileioPowerCut(t *testing.T) {
	for _, fs := range []string{"ext4", "xfs"} {
		for _, closed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/closed=%v", fs, closed), func(t *testing.T) {
				if _, err := os.Stat("/usr/sbin/mkfs." + fs); err != nil {
					t.Skip(err)
				}
				mnt, dev := loopDev(t, fs, 320<<20)
				path := filepath.Join(mnt, "cut.dat")
				w, err := fileio.Create(path, nil)
				require.NoError(t, err)
				var want bytes.Buffer
				next := crashStream(uint64(len(fs)))
				for i := 0; want.Len() < 3<<20; i++ {
					p := next()
					want.Write(p)
					_, err := w.Write(p)
					require.NoError(t, err)
					if i%7 == 6 {
						require.NoError(t, w.Sync())
					}
				}
				require.NoError(t, w.Sync())
				synced := w.Synced()
				if closed {
					require.NoError(t, w.Close())
				} else {
					for w.Size() < synced+2<<20 { // lost in the cut, or not
						_, err := w.Write(next())
						require.NoError(t, err)
					}
				}

				d, err := os.Open(mnt)
				require.NoError(t, err)
				err = unix.IoctlSetPointerInt(int(d.Fd()), xfsIocGoingDown, goingDownNoLogFlush)
				d.Close()
				require.NoError(t, err, "shutdown")
				if !closed {
					w.Close() // fails on a dead filesystem; it must not hang
				}
				require.NoError(t, unix.Unmount(mnt, 0))
				require.NoError(t, unix.Mount(dev, mnt, fs, 0, ""))
				defer unix.Unmount(mnt, 0)

				st, err := os.Stat(path)
				require.NoError(t, err, "the file did not survive the power cut")
				t.Logf("synced %d, file %d bytes after the cut", synced, st.Size())
				if closed {
					require.Equal(t, synced, st.Size(), "a closed file is exactly its Size after a power cut")
				}
				r, err := fileio.Open(path, &fileio.Options{Size: synced})
				require.NoError(t, err)
				defer r.Close()
				got := make([]byte, synced)
				_, err = r.ReadAt(got, 0)
				require.NoError(t, err)
				require.True(t, bytes.Equal(want.Bytes()[:synced], got), "synced bytes differ")
			})
		}
	}
}
