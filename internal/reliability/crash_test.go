package reliability

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/internal/testenv"
)

// crashBlob is blob i of the crash test: its size and bytes follow from i,
// so the parent knows every offset without being told.
func crashBlob(i int) []byte {
	v := make([]byte, (i*37)%900)
	for j := range v {
		v[j] = byte(i + j*3)
	}
	return v
}

// crashIterations is how often the child is killed per filesystem.
const crashIterations = 12

// TestCrash runs a writer in a child process that syncs at known points and
// kills it with SIGKILL at a random moment: every blob acknowledged before
// the last completed Sync must read back byte for byte. (A process crash,
// not a power cut: what a kill cannot lose from the page cache, a power cut
// could; the direct path writes past the page cache either way.)
func TestCrash(t *testing.T) {
	if testenv.Child() == "crash-writer" {
		crashWriter(t)
		return
	}
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	var blobsChecked, bytesChecked int
	for it := range crashIterations {
		dir := testenv.Dir(t)
		path := filepath.Join(dir, "crash.blob")
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrash$", "-test.count=1")
		cmd.Env = append(os.Environ(), testenv.ChildEnv+"=crash-writer", "DIO_CRASH_PATH="+path)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		acked := make(chan int, 1000)
		go func() {
			defer close(acked)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if n, ok := strings.CutPrefix(sc.Text(), "synced "); ok {
					k, _ := strconv.Atoi(n)
					acked <- k
				}
			}
		}()
		// Wait for the first sync, then a random while, then kill.
		first, ok := <-acked
		require.True(t, ok, "child ended before its first sync")
		time.Sleep(time.Duration(r.IntN(150)) * time.Millisecond)
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		last := first
		for k := range acked {
			last = k
		}
		_ = cmd.Wait()

		rd, err := blobio.Open(path, nil)
		require.NoError(t, err)
		var off int64
		for i := range last {
			want := crashBlob(i)
			got, err := rd.ReadBlob(off, nil)
			require.NoError(t, err, "iteration %d: blob %d of %d synced, at %d", it, i, last, off)
			require.True(t, bytes.Equal(want, got), "iteration %d: synced blob %d at %d differs", it, i, off)
			off += int64(blobio.HeaderSize(len(want), blobio.None) + len(want))
			bytesChecked += len(want)
		}
		blobsChecked += last
		rd.Close()
	}
	t.Logf("%s: %d kills, %d synced blobs (%d bytes) verified, 0 lost", testenv.FS(), crashIterations, blobsChecked, bytesChecked)
}

// crashWriter is the child: it writes blobs forever, syncing every few and
// reporting each completed Sync on stdout.
func crashWriter(t *testing.T) {
	w, err := blobio.Create(os.Getenv("DIO_CRASH_PATH"), &blobio.Options{BufferSize: 16 << 10, Buffers: 3})
	require.NoError(t, err)
	for i := 0; ; i++ {
		_, err := w.WriteBlob(crashBlob(i))
		require.NoError(t, err)
		if i%25 == 24 {
			require.NoError(t, w.Sync())
			fmt.Printf("synced %d\n", i+1)
		}
	}
}
