package fileio_test

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/fileio"
	"github.com/dio-storage/dio/internal/testenv"
)

// A Writer dropped without Close gives its Pool buffers back, closes its
// descriptor and stops its engine's goroutines once it is collected, and
// writes nothing more: its buffered bytes never reach the file.
func TestUnclosedWriterReleased(t *testing.T) {
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			pool, err := aligned.NewPool(aligned.DefaultBufferSize, 4096, 4*aligned.DefaultBufferSize)
			require.NoError(t, err)
			defer pool.Close()
			dir := testenv.Dir(t)
			// A first Writer sets up what the process keeps (io_uring's
			// shared rings), so that the counts below are the Writer's own.
			w, err := fileio.Create(filepath.Join(dir, "warm-up"), &fileio.Options{IO: p})
			require.NoError(t, err)
			require.NoError(t, w.Close())
			path := filepath.Join(dir, "dropped")
			fds, goroutines := testenv.OpenFDs(), runtime.NumGoroutine()

			func() {
				w, err := fileio.Create(path, &fileio.Options{IO: p, Pool: pool})
				require.NoError(t, err)
				_, err = w.Write([]byte("never closed"))
				require.NoError(t, err)
				require.Equal(t, 1, pool.Stats().InUse)
			}()

			require.True(t, testenv.Collected(func() bool { return pool.Stats().InUse == 0 }),
				"the dropped Writer's pool buffer was never returned")
			require.True(t, testenv.Collected(func() bool { return testenv.OpenFDs() <= fds }),
				"descriptors: %d open, %d before", testenv.OpenFDs(), fds)
			testenv.WaitGoroutines(t, goroutines)
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			require.NotContains(t, string(b), "never closed", "a cleanup must not flush")
		})
	}
}
