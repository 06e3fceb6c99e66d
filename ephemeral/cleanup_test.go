package ephemeral_test

import (
	"io"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/ephemeral"
	"github.com/dio-storage/dio/internal/testenv"
)

// A File dropped without Close, after writes and reads from the disk,
// gives its Pool buffer back, closes its descriptor and stops its engines'
// goroutines (the writer's and the readers' queues) once it is collected.
func TestUnclosedFileReleased(t *testing.T) {
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			pool, err := aligned.NewPool(aligned.DefaultBufferSize, 4096, 4*aligned.DefaultBufferSize)
			require.NoError(t, err)
			defer pool.Close()
			dir := testenv.Dir(t)
			// A first File sets up what the process keeps (io_uring's
			// shared rings), so that the counts below are the File's own.
			f, err := ephemeral.Create(dir, &ephemeral.Options{IO: p})
			require.NoError(t, err)
			require.NoError(t, f.Close())
			fds, goroutines := testenv.OpenFDs(), runtime.NumGoroutine()

			func() {
				f, err := ephemeral.Create(dir, &ephemeral.Options{IO: p, Pool: pool})
				require.NoError(t, err)
				data := make([]byte, 3*aligned.DefaultBufferSize)
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

			require.True(t, testenv.Collected(func() bool { return pool.Stats().InUse == 0 }),
				"the dropped File's pool buffers were never returned")
			require.True(t, testenv.Collected(func() bool { return testenv.OpenFDs() <= fds }),
				"descriptors: %d open, %d before", testenv.OpenFDs(), fds)
			testenv.WaitGoroutines(t, goroutines)
		})
	}
}
