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
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/internal/testenv"
)

// crashBlob is blob i of the crash tests: its size and bytes follow from
// i, so the parent knows every blob the child wrote without being told.
// Every seventh is empty, so that the 4-byte header of an empty blob is on
// the disk when the writer dies.
func crashBlob(i int) []byte {
	if i%7 == 3 {
		return nil
	}
	n := (i * 37) % 900
	if i%50 == 49 {
		n = 20_000 + i%3000 // longer than a buffer
	}
	v := make([]byte, n)
	for j := range v {
		v[j] = byte(i + j*3 + 1)
	}
	return v
}

// defaultKills is how often TestCrash kills the child per filesystem;
// DIO_CRASH_KILLS overrides it for a long run by hand.
const defaultKills = 6

// TestCrash runs a writer in a child process that syncs at known points and
// kills it with SIGKILL at a random moment. The file is then scanned twice,
// unbounded and bounded by the child's last Synced: every blob acknowledged
// by a Sync reads back byte for byte, and nothing the writer was not given
// comes back: no phantom, a record that is not blob i at blob i's offset
// (an empty blob read out of the zeros the writer grew the file by, or
// one decoded past the data). Past the last Sync a blob may be torn (its
// header written, part of its payload still zeros). The bounded scan
// returns exactly the synced blobs.
// (A process crash, not a power cut: see TestPowerCut for that.)
func TestCrash(t *testing.T) {
	if testenv.Child() == "crash-writer" {
		crashWriter(t)
		return
	}
	kills := defaultKills
	if n, err := strconv.Atoi(os.Getenv("DIO_CRASH_KILLS")); err == nil && n > 0 {
		kills = n
	}
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	var total crashTally
	for it := range kills {
		dir := testenv.Dir(t)
		path := filepath.Join(dir, "crash.blob")
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrash$", "-test.count=1")
		cmd.Env = append(os.Environ(), testenv.ChildEnv+"=crash-writer", "DIO_CRASH_PATH="+path)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		acked := make(chan [2]int64, 1000)
		go func() {
			defer close(acked)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var n, size int64
				if _, err := fmt.Sscanf(sc.Text(), "synced %d %d", &n, &size); err == nil {
					acked <- [2]int64{n, size}
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

		st, err := os.Stat(path)
		require.NoError(t, err)
		name := fmt.Sprintf("kill %d (%d blobs, %d bytes synced, file %d bytes)", it, last[0], last[1], st.Size())
		unbounded := scanCrashed(t, path, nil, int(last[0]), name+", unbounded")
		bounded := scanCrashed(t, path, &blobio.Options{Size: last[1]}, int(last[0]), name+", bounded")
		require.Equal(t, int(last[0]), bounded.blobs, "%s: the bounded scan returns exactly the synced blobs", name)
		require.NoError(t, bounded.err, "%s: the bounded scan ends cleanly", name)
		total.add(unbounded)
		total.kills++
		total.synced += int(last[0])
		total.tail += st.Size() - last[1]
	}
	t.Logf("%s: %d kills, %d synced blobs verified; unbounded scans: %d blobs, %d unsynced blobs read back intact, %d phantom records, %d torn, %d bytes of file past the synced size",
		testenv.FS(), total.kills, total.synced, total.blobs, total.unsynced, total.phantoms, total.torn, total.tail)
	require.Zero(t, total.phantoms, "phantom records: blobs the writer never wrote")
}

// crashTally is what a scan of a crashed file found.
type crashTally struct {
	kills, synced int
	blobs         int   // records the Scanner returned
	unsynced      int   // records past the last Sync, intact
	phantoms      int   // records the writer never wrote: not blob i at blob i's offset and length, or bytes it never wrote
	torn          int   // blob i at its place with part of its payload still zeros
	tail          int64 // file bytes past the synced size
	err           error // the Scanner's
}

func (c *crashTally) add(d crashTally) {
	c.blobs += d.blobs
	c.unsynced += d.unsynced
	c.phantoms += d.phantoms
	c.torn += d.torn
}

// maxPhantoms stops a scan that reads zeros as blobs: the old writer's
// files gave millions.
const maxPhantoms = 100_000

// scanCrashed scans the file left by a killed crashWriter that had synced
// blobs [0, synced), checks those, and counts what follows them.
func scanCrashed(t *testing.T, path string, o *blobio.Options, synced int, name string) crashTally {
	t.Helper()
	rd, err := blobio.Open(path, o)
	require.NoError(t, err, name)
	defer rd.Close()
	var c crashTally
	s := blobio.NewScanner(rd)
	var off int64
	start := time.Now()
	for s.Scan() && c.phantoms < maxPhantoms {
		i := c.blobs
		c.blobs++
		want, got := crashBlob(i), s.Bytes()
		if i < synced {
			require.Equal(t, off, s.Offset(), "%s: synced blob %d", name, i)
			require.True(t, bytes.Equal(want, got), "%s: synced blob %d at %d differs", name, i, off)
			off += int64(blobio.HeaderSize(len(want), blobio.None) + len(want))
			continue
		}
		switch {
		case s.Offset() != off || len(got) != len(want):
			// Not blob i at its place: a record the writer never wrote
			// (an empty blob read out of zeros, or one decoded past or
			// out of what it was given).
			c.phantoms++
			continue
		case bytes.Equal(want, got):
			c.unsynced++
		case tornOnly(want, got):
			c.torn++
		default:
			c.phantoms++ // bytes the writer never wrote
			continue
		}
		off += int64(blobio.HeaderSize(len(want), blobio.None) + len(want))
	}
	c.err = s.Err()
	require.GreaterOrEqual(t, c.blobs, synced, "%s: %d of %d synced blobs scanned (%v)", name, c.blobs, synced, c.err)
	require.Less(t, time.Since(start), 10*time.Second, "%s: the scan takes too long", name)
	return c
}

// tornOnly reports whether got is want with some bytes still zero: blob i
// whose header reached the file before all of its payload did.
func tornOnly(want, got []byte) bool {
	for j := range want {
		if got[j] != want[j] && got[j] != 0 {
			return false
		}
	}
	return true
}

// crashWriter is the child: it writes blobs forever, syncing every few and
// reporting each completed Sync on stdout with the blob count and Synced.
func crashWriter(t *testing.T) {
	w, err := blobio.Create(os.Getenv("DIO_CRASH_PATH"), &blobio.Options{BufferSize: 16 << 10, Buffers: 3})
	require.NoError(t, err)
	for i := 0; ; i++ {
		_, err := w.WriteBlob(crashBlob(i))
		require.NoError(t, err)
		if i%25 == 24 {
			require.NoError(t, w.Sync())
			fmt.Printf("synced %d %d\n", i+1, w.Synced())
		}
	}
}
