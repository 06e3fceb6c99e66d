package ephemeral_test

import (
	"io"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/ephemeral"
	"github.com/dio-storage/dio/internal/testenv"
)

// openFDs counts the process's open descriptors, or returns -1 where
// /proc/self/fd does not list them.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// collected runs the garbage collector until done reports true, for at
// most five seconds (a cleanup runs on its own goroutine after the cycle
// that finds its object unreachable), and returns done's last answer.
func collected(done func() bool) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		runtime.GC()
		if done() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return done()
}

// A File dropped without Close, after writes and reads from the disk,
// gives its Pool buffer back, closes its descriptor and stops its engines'
// goroutines (the writer's and the readers' queues) once it is collected.
func TestUnclosedFileReleased(t *testing.T) {
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			pool, err := aligned.NewPool(aligned.DefaultBlockSize, 4096, 4*aligned.DefaultBlockSize)
			require.NoError(t, err)
			defer pool.Close()
			dir := testenv.Dir(t)
			// A first File sets up what the process keeps (io_uring's
			// shared rings), so that the counts below are the File's own.
			f, err := ephemeral.Create(dir, &ephemeral.Options{IO: p})
			require.NoError(t, err)
			require.NoError(t, f.Close())
			fds, goroutines := openFDs(), runtime.NumGoroutine()

			func() {
				f, err := ephemeral.Create(dir, &ephemeral.Options{IO: p, Pool: pool})
				require.NoError(t, err)
				data := make([]byte, 3*aligned.DefaultBlockSize)
				for i := range data {
					data[i] = byte(i)
				}
				_, err = f.Write(data)
				require.NoError(t, err)
				require.NoError(t, f.Flush())
				got := make([]byte, len(data))
				_, err = f.ReadAt(got, 0) // from the disk: the read side's queue and buffers
				if err != io.EOF {
					require.NoError(t, err)
				}
				require.Equal(t, data, got)
				require.NotZero(t, pool.Stats().InUse)
			}()

			require.True(t, collected(func() bool { return pool.Stats().InUse == 0 }),
				"the dropped File's pool buffers were never returned")
			require.True(t, collected(func() bool { return openFDs() <= fds }),
				"descriptors: %d open, %d before", openFDs(), fds)
			testenv.WaitGoroutines(t, goroutines)
		})
	}
}
