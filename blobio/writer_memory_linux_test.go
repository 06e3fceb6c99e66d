package blobio_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/internal/testenv"
)

// rssAnon returns the process's resident anonymous memory, in bytes
// (RssAnon in /proc/self/status: the ring's mmapped pages count there).
func rssAnon(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "RssAnon:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Skip("no RssAnon in /proc/self/status")
	return 0
}

// TestIdleWriterMemory: a writer's ring is committed as it fills, so 100
// writers that wrote nothing or one small blob hold next to no memory;
// with the ring prefaulted they held 104 MB (1 MiB each with O_DIRECT).
func TestIdleWriterMemory(t *testing.T) {
	const writers, limit = 100, 16 << 20 // limit: a sixth of the prefaulted cost
	dir := testenv.Dir(t)
	for _, blob := range []bool{false, true} {
		t.Run(fmt.Sprintf("blob=%v", blob), func(t *testing.T) {
			before := rssAnon(t)
			var ws []*blobio.Writer
			defer func() {
				for _, w := range ws {
					require.NoError(t, w.Close())
				}
			}()
			for i := range writers {
				w, err := blobio.Create(filepath.Join(dir, fmt.Sprintf("%v-%d.blob", blob, i)), nil)
				require.NoError(t, err)
				ws = append(ws, w)
				if blob {
					_, err = w.WriteBlob(record(i, 150))
					require.NoError(t, err)
				}
			}
			grew := rssAnon(t) - before
			t.Logf("%d writers (%v) took %d KiB", writers, ws[0].Mode(), grew>>10)
			assert.Less(t, grew, int64(limit), "%d idle writers hold %d KiB", writers, grew>>10)
		})
	}
}
