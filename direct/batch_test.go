package direct_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestSubmitBatchRoundTrip writes blocks with one batch and reads them
// back with another, each longer than the queue's depth, on every engine:
// every request completes once, with its Token, and the bytes match.
func TestSubmitBatchRoundTrip(t *testing.T) {
	for _, kind := range engines(t) {
		t.Run(kind.String(), func(t *testing.T) {
			f := openOrSkip(t, filepath.Join(testenv.Dir(t), "b"), os.O_RDWR|os.O_CREATE)
			defer f.Close()
			q := newQueue(t, f, kind, 4)
			n := f.Alignment().Block()
			const blocks = 24
			src := alignedBlocks(t, f, blocks, 7)
			dst := alignedBlocks(t, f, blocks, 0)
			for _, op := range []direct.Op{direct.OpWrite, direct.OpRead} {
				buf := src
				if op == direct.OpRead {
					buf = dst
				}
				done := make(chan direct.Completion, blocks)
				rs := make([]direct.Request, blocks)
				for k := range rs {
					rs[k] = direct.Request{Op: op, Buf: buf[k*n : (k+1)*n], Off: int64(k * n), Token: uint64(k), Done: done}
				}
				seen := make(chan []bool, 1)
				go func() { // Await makes room while the batch waits for it
					got := make([]bool, blocks)
					for range blocks {
						c := q.Await(done)
						if assert.NoError(t, c.Err) && assert.Less(t, c.Token, uint64(blocks)) {
							assert.False(t, got[c.Token], "token %d twice", c.Token)
							got[c.Token] = true
							assert.Equal(t, n, c.N)
						}
					}
					seen <- got
				}()
				k, err := direct.SubmitBatch(q, rs)
				require.NoError(t, err)
				require.Equal(t, blocks, k)
				assert.NotContains(t, <-seen, false)
			}
			assert.Equal(t, src, dst)
		})
	}
}

// TestSubmitBatchStopsAtInvalid: an unaligned request in a batch ends it:
// the ones before it are accepted and complete, it and those after are
// not, and the error says why.
func TestSubmitBatchStopsAtInvalid(t *testing.T) {
	for _, kind := range engines(t) {
		t.Run(kind.String(), func(t *testing.T) {
			f := openOrSkip(t, filepath.Join(testenv.Dir(t), "b"), os.O_RDWR|os.O_CREATE)
			defer f.Close()
			q := newQueue(t, f, kind, 8)
			n := f.Alignment().Block()
			buf := alignedBlocks(t, f, 6, 3)
			done := make(chan direct.Completion, 6)
			rs := make([]direct.Request, 6)
			for k := range rs {
				rs[k] = direct.Request{Op: direct.OpWrite, Buf: buf[k*n : (k+1)*n], Off: int64(k * n), Token: uint64(k), Done: done}
			}
			rs[3].Off = 1 // unaligned
			k, err := direct.SubmitBatch(q, rs)
			require.ErrorIs(t, err, direct.ErrUnaligned)
			require.Equal(t, 3, k)
			got := map[uint64]bool{}
			for range k {
				c := q.Await(done)
				require.NoError(t, c.Err)
				got[c.Token] = true
			}
			assert.Equal(t, map[uint64]bool{0: true, 1: true, 2: true}, got)
			assert.Empty(t, done)
		})
	}
}

// TestSubmitBatchCloseStress races Close against goroutines submitting
// batches (longer than the depth, so that they wait for room) and
// awaiting them: Close returns, each batch reports how many it got in,
// and exactly those complete, once each, with their Tokens.
func TestSubmitBatchCloseStress(t *testing.T) {
	for _, kind := range engines(t) {
		t.Run(kind.String(), func(t *testing.T) {
			f := openOrSkip(t, filepath.Join(testenv.Dir(t), "s"), os.O_RDWR|os.O_CREATE)
			defer f.Close()
			n := f.Alignment().Block()
			blk := alignedBlocks(t, f, 3*8, 1)
			end := time.Now().Add(stressTime(t))
			rounds := 0
			for ; time.Now().Before(end); rounds++ {
				stop := watchdog(fmt.Sprintf("%v round %d", kind, rounds))
				q, err := f.NewQueue(&direct.QueueOptions{Depth: 2 + rounds%5, Engine: kind})
				require.NoError(t, err)
				var wg sync.WaitGroup
				errs := make(chan error, 3)
				for w := range 3 {
					wg.Go(func() {
						done := make(chan direct.Completion, 8)
						rs := make([]direct.Request, 8)
						for tok := uint64(0); ; tok += 8 {
							for k := range rs {
								b := blk[(w*8+k)*n : (w*8+k+1)*n]
								rs[k] = direct.Request{Op: direct.OpWrite, Buf: b, Off: int64((w*8 + k) * n), Token: tok + uint64(k), Done: done}
							}
							// done has room for the whole batch, so a batch
							// longer than the depth finds room as the engine
							// delivers (io_uring: as SubmitBatch reaps).
							k, err := direct.SubmitBatch(q, rs)
							seen := map[uint64]bool{}
							for range k {
								c := q.Await(done)
								if c.Err != nil || c.Token < tok || c.Token >= tok+uint64(k) || seen[c.Token] {
									errs <- fmt.Errorf("completion %+v in batch %d of %d", c, tok, k)
									return
								}
								seen[c.Token] = true
							}
							if err != nil {
								if err != direct.ErrQueueClosed {
									errs <- err
								}
								return
							}
						}
					})
				}
				time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
				require.NoError(t, q.Close())
				wg.Wait()
				stop()
				close(errs)
				for err := range errs {
					t.Fatal(err)
				}
			}
			t.Logf("%d rounds", rounds)
		})
	}
}
