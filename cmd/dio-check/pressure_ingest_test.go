package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/internal/testenv"
)

// TestIngestShapes runs each shape with several writers and a small roll:
// every writer gets past its first file (append: rolled; compact: read
// back, rewritten, and on to the next), each blob is timed, and stop
// leaves nothing behind.
func TestIngestShapes(t *testing.T) {
	for _, engine := range []string{"std-fs", "direct+pwrite"} {
		for _, shape := range []string{shapeAppend, shapeCompact} {
			t.Run(engine+"/"+shape, func(t *testing.T) {
				dir := testenv.Dir(t)
				const writers, roll = 3, 2 << 20
				r, err := startIngest(dir, engine, ingestOptions{writers: writers, shape: shape, roll: roll})
				var un unavailable
				if errors.As(err, &un) {
					t.Skip(un)
				}
				require.NoError(t, err)
				// A file per writer, opened before the writes: counted,
				// not listed, since a writer may already be rolling its
				// first file away (on tmpfs one was, within the listing).
				for i := range writers {
					assert.Positive(t, r.made[i].Load(), "writer %d has its first file when startIngest returns", i)
				}
				// A third file is an append writer's second roll, a
				// compact one's second round.
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !allMade(r, 3); {
					time.Sleep(time.Millisecond)
				}
				made := make([]int64, writers)
				for i := range made {
					made[i] = r.made[i].Load()
				}
				st, err := r.stop(nil)
				require.NoError(t, err)
				for i, n := range made {
					assert.GreaterOrEqual(t, n, int64(3), "writer %d made %d files", i, n)
				}
				assert.Greater(t, st.bytes, int64(writers*roll/2), "the writers wrote less than a file each")
				assert.EqualValues(t, st.bytes/valueSize, st.hist.Count(), "a latency per blob written")
				assert.Positive(t, st.mibs())
				left, _ := filepath.Glob(filepath.Join(dir, "*"))
				assert.Empty(t, left, fmt.Sprintf("%s left files", engine))
			})
		}
	}
}

// allMade reports whether every writer of r has created n files.
func allMade(r *ingestRun, n int64) bool {
	for i := range r.made {
		if r.made[i].Load() < n {
			return false
		}
	}
	return true
}
