package fileio_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/fileio"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestReadersSharePool: Readers opened with a Pool read through its
// buffers and hold none between reads, whatever their number; reads
// past its budget (small here, on purpose) get buffers of their own and
// still read the right bytes; every buffer is back when they are done.
func TestReadersSharePool(t *testing.T) {
	dir := testenv.Dir(t)
	pool, err := aligned.NewPool(64<<10, 4096, 4*64<<10)
	require.NoError(t, err)
	defer pool.Close()
	const files = 8
	data := make([][]byte, files)
	readers := make([]*fileio.Reader, files)
	for i := range files {
		path := filepath.Join(dir, "f"+string(rune('a'+i)))
		w, err := fileio.Create(path, nil)
		require.NoError(t, err)
		data[i] = content(uint64(i), 700<<10+i*1111)
		_, err = w.Write(data[i])
		require.NoError(t, err)
		require.NoError(t, w.Close())
		readers[i], err = fileio.Open(path, &fileio.Options{Pool: pool})
		require.NoError(t, err)
	}
	require.Zero(t, pool.Stats().Allocated, "nothing read yet")

	var wg sync.WaitGroup
	deadline := time.Now().Add(2 * time.Second)
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 31))
			for time.Now().Before(deadline) {
				i := r.IntN(files)
				n := 1 + r.IntN(200<<10) // some longer than a pool buffer
				off := r.IntN(len(data[i]) - n)
				p := make([]byte, n)
				m, err := readers[i].ReadAt(p, int64(off))
				if err != nil || m != n || !bytes.Equal(p, data[i][off:off+n]) {
					t.Errorf("file %d at %d, %d bytes: %d, %v, equal %v", i, off, n, m, err, bytes.Equal(p[:m], data[i][off:off+m]))
					return
				}
			}
		})
	}
	wg.Wait()
	st := pool.Stats()
	require.Positive(t, st.HighWater, "reads took the Pool's buffers")
	require.Zero(t, st.InUse, "every read gave its buffer back")
	require.LessOrEqual(t, st.Allocated, st.Capacity, "no more buffers than the budget")
	for _, r := range readers {
		require.NoError(t, r.Close())
	}
}

// TestReaderPoolMisfit: a Pool whose buffers the file's alignment
// cannot take is refused at Open, as a Writer's is at Create.
func TestReaderPoolMisfit(t *testing.T) {
	dir := testenv.Dir(t)
	path := filepath.Join(dir, "f")
	w, err := fileio.Create(path, nil)
	require.NoError(t, err)
	_, err = w.Write([]byte("x"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	pool, err := aligned.NewPool(512, 512, 4096)
	require.NoError(t, err)
	defer pool.Close()
	r, err := fileio.Open(path, &fileio.Options{Pool: pool})
	if r != nil {
		// The file takes 512-byte alignment (ext4 on a 512-byte
		// disk, tmpfs): nothing to refuse here.
		require.NoError(t, err)
		require.NoError(t, r.Close())
		return
	}
	require.True(t, errors.Is(err, fileio.ErrInvalidOptions), "%v", err)
}
