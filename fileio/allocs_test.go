package fileio_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/fileio"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestReadAtAllocs: a ReadAt that succeeds allocates nothing, whether it
// fits one pooled buffer or spans several reads in flight (an error
// check on the success path once cost an allocation per read).
func TestReadAtAllocs(t *testing.T) {
	if testing.Short() || testenv.Race {
		t.Skip("AllocsPerRun: -short, or -race (make test runs it without)")
	}
	path := filepath.Join(testenv.Dir(t), "allocs")
	w, err := fileio.Create(path, nil)
	require.NoError(t, err)
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	_, err = w.Write(want)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	r, err := fileio.Open(path, nil)
	require.NoError(t, err)
	defer r.Close()
	for _, c := range []struct {
		name string
		off  int64
		n    int
	}{{"4KiB unaligned", 1000, 4096}, {"512KiB", 4096, 512 << 10}} {
		p := make([]byte, c.n)
		allocs := testing.AllocsPerRun(100, func() {
			if n, err := r.ReadAt(p, c.off); err != nil || n != c.n {
				t.Fatalf("ReadAt: %d, %v", n, err)
			}
		})
		assert.Equal(t, want[c.off:c.off+int64(c.n)], p)
		assert.Zero(t, allocs, "%s: allocations per ReadAt", c.name)
	}
}
