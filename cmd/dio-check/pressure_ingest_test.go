package main

import (
	"errors"
	"fmt"
	"os"
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
				ents, err := os.ReadDir(dir)
				require.NoError(t, err)
				assert.Len(t, ents, writers, "a file per writer, opened before the writes")
				// Each writer's file 2 is its third append file, or
				// its second compaction's first.
				third := make([]bool, writers)
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !allTrue(third); {
					for i := range third {
						if _, err := os.Stat(r.path(i, 2)); err == nil {
							third[i] = true
						}
					}
					time.Sleep(time.Millisecond)
				}
				st, err := r.stop(nil)
				require.NoError(t, err)
				assert.Equal(t, []bool{true, true, true}, third, "a writer never got to its file 2")
				assert.Greater(t, st.bytes, int64(writers*roll/2), "the writers wrote less than a file each")
				assert.EqualValues(t, st.bytes/valueSize, st.hist.n, "a latency per blob written")
				assert.Positive(t, st.mibs())
				left, _ := filepath.Glob(filepath.Join(dir, "*"))
				assert.Empty(t, left, fmt.Sprintf("%s left files", engine))
			})
		}
	}
}

func allTrue(b []bool) bool {
	for _, v := range b {
		if !v {
			return false
		}
	}
	return true
}
