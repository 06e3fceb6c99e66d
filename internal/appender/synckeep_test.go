package appender

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/internal/testenv"
)

// TestSyncKeepsReservation: Sync leaves the space grown ahead in place,
// so that the next write needs no fallocate, and Close alone cuts the
// file back to its logical size.
func TestSyncKeepsReservation(t *testing.T) {
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			f, path := open(t, p)
			a, err := New(f, Options{BufferSize: 4096, Buffers: 4})
			require.NoError(t, err)
			want := fill(t, a, 10_000, 7)
			require.NoError(t, a.Sync())
			st, err := os.Stat(path)
			require.NoError(t, err)
			if a.grow {
				assert.GreaterOrEqual(t, st.Size(), int64(minGrowth), "Sync cut the reservation back")
			} else {
				assert.GreaterOrEqual(t, st.Size(), a.Size(), "the file does not cover the synced data")
			}
			grown := a.fileSize
			want = append(want, fill(t, a, 10_000, 8)...)
			require.NoError(t, a.Sync())
			if a.grow {
				assert.Equal(t, grown, a.fileSize, "the second Sync's writes grew the file again")
			}
			require.NoError(t, a.Close())
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, want, got, "Close cuts the file to the stream")
		})
	}
}
