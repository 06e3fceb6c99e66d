package appender

import (
	"bytes"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestLockGuardsCached appends, flushes (refitting the tail) and closes
// while another goroutine, holding Options.Lock, calls Size and Cached and
// checks the bytes it is shown: under -race, any change to what they read
// made outside the lock is reported, and any byte changed under a reader
// fails the comparison.
func TestLockGuardsCached(t *testing.T) {
	for _, p := range testenv.Policies() {
		for _, pooled := range []bool{false, true} {
			name := p.String()
			if pooled {
				name += "/pool"
			}
			t.Run(name, func(t *testing.T) {
				f, _ := open(t, p)
				var mu sync.Mutex
				o := Options{BufferSize: 8 << 10, Buffers: 4, Lock: &mu}
				if pooled {
					pool, err := aligned.NewPool(8<<10, 4096, 4*(8<<10))
					require.NoError(t, err)
					defer pool.Close()
					o.Pool = pool
				}
				a, err := New(f, o)
				require.NoError(t, err)
				want := make([]byte, 2<<20)
				rng := rand.New(rand.NewPCG(7, 7))
				for i := range want {
					want[i] = byte(rng.Uint32())
				}
				var done atomic.Bool
				var looks atomic.Int64 // the writer waits on it now and then
				var hits int
				var wg sync.WaitGroup
				wg.Go(func() {
					r := rand.New(rand.NewPCG(8, 8))
					for !done.Load() {
						mu.Lock()
						size := a.Size()
						if size > 0 {
							off := size - 1 - r.Int64N(min(size, 64<<10))
							mem, next := a.Cached(off)
							looks.Add(1)
							switch {
							case mem != nil:
								hits++
								if off+int64(len(mem)) > size || !bytes.Equal(mem, want[off:off+int64(len(mem))]) {
									t.Errorf("Cached(%d): %d bytes that were not appended there", off, len(mem))
								}
							case next <= off || next > size:
								t.Errorf("Cached(%d): not in memory, next %d, size %d", off, next, size)
							}
						}
						mu.Unlock()
					}
				})
				for i, pos := 0, 0; pos < len(want); i++ {
					n := min(1+rng.IntN(3000), len(want)-pos)
					k, err := a.Write(want[pos : pos+n])
					require.NoError(t, err)
					pos += k
					if i%32 == 0 {
						// Let the reader in: on a fast file (ramfs,
						// tmpfs) the writer could otherwise finish
						// before it is first scheduled.
						for seen := looks.Load(); looks.Load() == seen; {
							runtime.Gosched()
						}
					}
					if rng.IntN(40) == 0 {
						require.NoError(t, a.Flush())
					}
				}
				require.NoError(t, a.Close())
				done.Store(true)
				wg.Wait()
				assert.Positive(t, hits)
				t.Logf("%d looks, %d in memory", looks.Load(), hits)
			})
		}
	}
}
