package reliability

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/fileio"
	"github.com/dio-storage/dio/internal/testenv"
)

// crashStream returns the bytes a fileio crash writer writes, in the
// pieces it writes them: random sizes from 1 byte to 300 KiB, the same
// for a seed in the parent and in the child.
func crashStream(seed uint64) func() []byte {
	r := rand.New(rand.NewPCG(seed, 22))
	return func() []byte {
		var n int
		switch r.IntN(3) {
		case 0:
			n = 1 + r.IntN(16)
		case 1:
			n = 1 + r.IntN(5000)
		default:
			n = 1 + r.IntN(300<<10)
		}
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(r.Uint32() | 1) // never 0: zeros a crash leaves show
		}
		return p
	}
}

// TestFileioCrash runs a fileio.Writer in a child that writes pieces of
// random sizes with a Sync every few, and kills it with SIGKILL at a
// random moment; the file opened with Options.Size set to the last
// Synced the child reported holds exactly the bytes written up to it.
// DIO_CRASH_KILLS sets the number of kills (the matrix's long run: 50).
func TestFileioCrash(t *testing.T) {
	if testenv.Child() == "fileio-crash-writer" {
		fileioCrashWriter(t)
		return
	}
	kills := defaultKills
	if n, err := strconv.Atoi(os.Getenv("DIO_CRASH_KILLS")); err == nil && n > 0 {
		kills = n
	}
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	var synced, tail int64
	for it := range kills {
		dir := testenv.Dir(t)
		path := filepath.Join(dir, "crash.dat")
		seed := r.Uint64()
		cmd := exec.Command(os.Args[0], "-test.run=^TestFileioCrash$", "-test.count=1")
		cmd.Env = append(os.Environ(), testenv.ChildEnv+"=fileio-crash-writer",
			"DIO_CRASH_PATH="+path, fmt.Sprintf("DIO_CRASH_SEED=%d", seed))
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		acked := make(chan int64, 1000)
		go func() {
			defer close(acked)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var size int64
				if _, err := fmt.Sscanf(sc.Text(), "synced %d", &size); err == nil {
					acked <- size
				}
			}
		}()
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
		name := fmt.Sprintf("kill %d (%d bytes synced, file %d bytes)", it, last, st.Size())
		require.GreaterOrEqual(t, st.Size(), last, name)
		var want bytes.Buffer
		next := crashStream(seed)
		for int64(want.Len()) < last {
			want.Write(next())
		}
		rd, err := fileio.Open(path, &fileio.Options{Size: last})
		require.NoError(t, err, name)
		require.Equal(t, last, rd.Size())
		s, err := rd.NewSequential(0)
		require.NoError(t, err)
		got, err := io.ReadAll(s)
		require.NoError(t, err, name)
		require.Equal(t, int(last), len(got), name)
		require.True(t, bytes.Equal(want.Bytes()[:last], got), "%s: the synced bytes differ", name)
		require.NoError(t, rd.Close())
		synced += last
		tail += st.Size() - last
	}
	t.Logf("%s: %d kills, %d synced bytes verified, %d bytes of file past the synced sizes", testenv.FS(), kills, synced, tail)
}

// fileioCrashWriter is the child: it writes the stream forever, syncing
// every few pieces and reporting each completed Sync's Synced on stdout.
func fileioCrashWriter(t *testing.T) {
	seed, err := strconv.ParseUint(os.Getenv("DIO_CRASH_SEED"), 10, 64)
	require.NoError(t, err)
	w, err := fileio.Create(os.Getenv("DIO_CRASH_PATH"), &fileio.Options{BufferSize: 16 << 10, Buffers: 4})
	require.NoError(t, err)
	next := crashStream(seed)
	for i := 0; ; i++ {
		_, err := w.Write(next())
		require.NoError(t, err)
		if i%5 == 4 {
			require.NoError(t, w.Sync())
			fmt.Printf("synced %d\n", w.Synced())
		}
	}
}
