package reliability

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/ephemeral"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestSharedPoolLoad runs 64 goroutines writing and reading blob files and
// ephemeral files that all share one pool of 16 buffers: no deadlock, the
// budget never exceeded, every byte verified.
func TestSharedPoolLoad(t *testing.T) {
	const (
		goroutines = 64
		budget     = 16
		bufSize    = 8 << 10
	)
	dir := testenv.Dir(t)
	pool, err := aligned.NewPool(bufSize, 4096, budget*bufSize)
	require.NoError(t, err)
	defer pool.Close()
	var verified atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for round := range 3 {
				var err error
				if (g+round)%2 == 0 {
					err = blobRound(dir, fmt.Sprintf("%d-%d", g, round), pool, r, &verified)
				} else {
					err = ephemeralRound(dir, pool, r, &verified)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	st := pool.Stats()
	t.Logf("%d bytes verified; pool high-water %d of %d buffers", verified.Load(), st.HighWater, budget)
	assert.LessOrEqual(t, st.HighWater, budget)
	assert.Zero(t, st.InUse)
}

func value(r *rand.Rand) []byte {
	v := make([]byte, r.IntN(3000))
	for i := range v {
		v[i] = byte(r.Uint32())
	}
	return v
}

func blobRound(dir, name string, pool *aligned.Pool, r *rand.Rand, verified *atomic.Int64) error {
	path := filepath.Join(dir, name)
	w, err := blobio.Create(path, &blobio.Options{Pool: pool, Buffers: 2})
	if err != nil {
		return err
	}
	var blobs [][]byte
	var offs []int64
	for range 50 {
		v := value(r)
		off, err := w.WriteBlob(v)
		if err != nil {
			w.Close()
			return err
		}
		blobs, offs = append(blobs, v), append(offs, off)
	}
	if err := w.Close(); err != nil {
		return err
	}
	rd, err := blobio.Open(path, nil)
	if err != nil {
		return err
	}
	defer rd.Close()
	for i, off := range offs {
		got, err := rd.ReadBlob(off, nil)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, blobs[i]) {
			return fmt.Errorf("%s: blob %d at %d differs", path, i, off)
		}
		verified.Add(int64(len(got)))
	}
	return nil
}

func ephemeralRound(dir string, pool *aligned.Pool, r *rand.Rand, verified *atomic.Int64) error {
	f, err := ephemeral.Create(dir, &ephemeral.Options{Pool: pool, Buffers: 2})
	if err != nil {
		return err
	}
	defer f.Close()
	var blobs [][]byte
	var offs []int64
	for range 50 {
		v := value(r)
		off, err := f.WriteBlob(v)
		if err != nil {
			return err
		}
		blobs, offs = append(blobs, v), append(offs, off)
		// Read an earlier one back while writing.
		i := r.IntN(len(blobs))
		got, err := f.ReadBlob(offs[i], nil)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, blobs[i]) {
			return fmt.Errorf("ephemeral blob %d at %d differs", i, offs[i])
		}
		verified.Add(int64(len(got)))
	}
	return nil
}
