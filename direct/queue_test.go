package direct_test

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/testenv"
)

// engines returns the engines this kernel can run, by name.
func engines(t *testing.T) []direct.EngineKind {
	kinds := []direct.EngineKind{direct.EnginePwrite}
	if err := fallback.URingErrorAt(testenv.Dir(t)); err == nil {
		kinds = append(kinds, direct.EngineURing)
	} else {
		t.Logf("io_uring not tested: %v", err)
	}
	return kinds
}

func newQueue(t *testing.T, f *direct.File, kind direct.EngineKind, depth int) direct.Queue {
	t.Helper()
	q, err := f.NewQueue(&direct.QueueOptions{Depth: depth, Engine: kind})
	require.NoError(t, err)
	require.Equal(t, kind, q.Engine())
	require.Equal(t, depth, q.Depth())
	t.Cleanup(func() { q.Close() })
	return q
}

// TestQueueRandomRoundTrip writes random aligned sizes at random aligned
// offsets through the queue at depths 1 to 8, then reads them back both
// through the queue and through plain pread.
func TestQueueRandomRoundTrip(t *testing.T) {
	for _, kind := range engines(t) {
		for _, depth := range []int{1, 2, 4, 8} {
			t.Run(fmt.Sprintf("%v/qd=%d", kind, depth), func(t *testing.T) {
				f := openOrSkip(t, filepath.Join(testenv.Dir(t), "q"), os.O_RDWR|os.O_CREATE)
				defer f.Close()
				queueRoundTrip(t, f, kind, depth)
			})
		}
	}
}

func queueRoundTrip(t *testing.T, f *direct.File, kind direct.EngineKind, depth int) {
	blk := f.Alignment().Block()
	const slots = 32
	r := rand.New(rand.NewPCG(uint64(depth), uint64(kind)))
	// Each slot is a region of up to 16 blocks; writes cover a random prefix.
	sizes := make([]int, slots)
	bufs := make([][]byte, slots)
	for i := range bufs {
		sizes[i] = (1 + r.IntN(16)) * blk
		b, err := aligned.New(16*blk, f.Alignment().Memory)
		require.NoError(t, err)
		t.Cleanup(b.Free)
		bufs[i] = b.Bytes()[:sizes[i]]
		for j := range bufs[i] {
			bufs[i][j] = byte(r.Uint32())
		}
	}
	q := newQueue(t, f, kind, depth)
	done := make(chan direct.Completion, slots)
	order := r.Perm(slots)
	for _, i := range order {
		require.NoError(t, q.Submit(direct.Request{Op: direct.OpWrite, Buf: bufs[i], Off: int64(i * 16 * blk), Token: uint64(i), Done: done}))
	}
	seen := map[uint64]bool{}
	for range slots {
		c := q.Await(done)
		require.NoError(t, c.Err)
		assert.Equal(t, direct.OpWrite, c.Op)
		assert.Equal(t, sizes[c.Token], c.N)
		assert.False(t, seen[c.Token], "token %d completed twice", c.Token)
		seen[c.Token] = true
	}
	require.NoError(t, q.Submit(direct.Request{Op: direct.OpSync, Token: 1000, Done: done}))
	c := q.Await(done)
	require.NoError(t, c.Err)
	assert.Equal(t, uint64(1000), c.Token)

	// Back through plain pread.
	for i, want := range bufs {
		got := make([]byte, len(want)+2*blk)
		b, err := aligned.New(len(got), f.Alignment().Memory)
		require.NoError(t, err)
		n, err := f.ReadAt(b.Bytes()[:len(want)], int64(i*16*blk))
		require.NoError(t, err)
		require.Equal(t, len(want), n)
		require.True(t, bytes.Equal(want, b.Bytes()[:n]), "slot %d differs through pread", i)
		b.Free()
	}

	// Back through the queue, into fresh buffers, all in flight at once.
	read := make([]*aligned.Buffer, slots)
	for i := range read {
		b, err := aligned.New(16*blk, f.Alignment().Memory)
		require.NoError(t, err)
		t.Cleanup(b.Free)
		read[i] = b
		require.NoError(t, q.Submit(direct.Request{Op: direct.OpRead, Buf: b.Bytes()[:sizes[i]], Off: int64(i * 16 * blk), Token: uint64(i), Done: done}))
	}
	for range slots {
		c := q.Await(done)
		require.NoError(t, c.Err)
		assert.Equal(t, sizes[c.Token], c.N)
		require.True(t, bytes.Equal(bufs[c.Token], read[c.Token].Bytes()[:c.N]), "slot %d differs through the queue", c.Token)
	}
}

// TestQueueReadsAtEOF writes with pwrite and reads through the queue: the
// other direction of the round trip, with a read cut short by the end of
// the file.
func TestQueueReadsAtEOF(t *testing.T) {
	for _, kind := range engines(t) {
		t.Run(kind.String(), func(t *testing.T) {
			f := openOrSkip(t, filepath.Join(testenv.Dir(t), "q"), os.O_RDWR|os.O_CREATE)
			defer f.Close()
			blk := f.Alignment().Block()
			b, err := aligned.New(4*blk, f.Alignment().Memory)
			require.NoError(t, err)
			defer b.Free()
			for i := range b.Bytes() {
				b.Bytes()[i] = byte(i * 7)
			}
			want := bytes.Clone(b.Bytes()[:3*blk])
			_, err = f.WriteAt(b.Bytes()[:3*blk], 0)
			require.NoError(t, err)
			clear(b.Bytes())

			q := newQueue(t, f, kind, 2)
			done := make(chan direct.Completion, 2)
			require.NoError(t, q.Submit(direct.Request{Op: direct.OpRead, Buf: b.Bytes(), Off: 0, Token: 7, Done: done}))
			c := q.Await(done)
			assert.Equal(t, 3*blk, c.N)
			assert.ErrorIs(t, c.Err, io.EOF)
			assert.Equal(t, want, b.Bytes()[:3*blk])
		})
	}
}

func TestQueueRejectsBadRequests(t *testing.T) {
	for _, kind := range engines(t) {
		t.Run(kind.String(), func(t *testing.T) {
			f := openOrSkip(t, filepath.Join(testenv.Dir(t), "q"), os.O_RDWR|os.O_CREATE)
			defer f.Close()
			a := f.Alignment()
			b, err := aligned.New(2*a.Block(), a.Memory)
			require.NoError(t, err)
			defer b.Free()
			q := newQueue(t, f, kind, 2)
			done := make(chan direct.Completion, 1)

			err = q.Submit(direct.Request{Op: direct.OpWrite, Buf: b.Bytes()[:a.Block()], Off: int64(a.Offset / 2), Done: done})
			if a.Offset > 1 {
				assert.ErrorIs(t, err, direct.ErrUnaligned)
			}
			err = q.Submit(direct.Request{Op: direct.OpWrite, Buf: b.Bytes()[:a.Block()], Off: -int64(a.Block()), Done: done})
			assert.ErrorIs(t, err, direct.ErrNegativeOffset)
			// Ending past the largest offset: the kernel's EINVAL, not a
			// filesystem refusing O_DIRECT.
			past := aligned.Down(math.MaxInt64, int64(a.Block()))
			err = q.Submit(direct.Request{Op: direct.OpRead, Buf: b.Bytes()[:2*a.Block()], Off: past, Done: done})
			assert.ErrorIs(t, err, syscall.EINVAL)
			assert.NotErrorIs(t, err, direct.ErrNotSupported)
			_, err = f.ReadAt(b.Bytes()[:2*a.Block()], past)
			assert.ErrorIs(t, err, syscall.EINVAL)
			assert.NotErrorIs(t, err, direct.ErrNotSupported)
			assert.Error(t, q.Submit(direct.Request{Op: direct.OpWrite, Buf: b.Bytes()}), "no Done channel")
			assert.Error(t, q.Submit(direct.Request{Op: 99, Done: done}), "unknown op")
			assert.Empty(t, done, "a refused request completed")

			require.NoError(t, q.Close())
			assert.ErrorIs(t, q.Submit(direct.Request{Op: direct.OpSync, Done: done}), direct.ErrQueueClosed)
			assert.NoError(t, q.Close(), "a second Close")
		})
	}
}

// TestQueueConcurrentUsers has one writer appending and several readers
// reading back what the writer has seen complete, all on one queue.
func TestQueueConcurrentUsers(t *testing.T) {
	for _, kind := range engines(t) {
		t.Run(kind.String(), func(t *testing.T) {
			f := openOrSkip(t, filepath.Join(testenv.Dir(t), "q"), os.O_RDWR|os.O_CREATE)
			defer f.Close()
			blk := f.Alignment().Block()
			q := newQueue(t, f, kind, 4)
			const blocks = 256
			pattern := func(i int) byte { return byte(i*31 + 1) }

			var mu sync.Mutex
			written := 0 // blocks [0, written) are on disk
			var wg sync.WaitGroup
			wg.Go(func() {
				done := make(chan direct.Completion, 2)
				bufs := make([]*aligned.Buffer, 2)
				for i := range bufs {
					b, err := aligned.New(blk, f.Alignment().Memory)
					if err != nil {
						t.Error(err)
						return
					}
					defer b.Free()
					bufs[i] = b
				}
				for i := range blocks {
					b := bufs[i%2].Bytes()
					for j := range b {
						b[j] = pattern(i)
					}
					if err := q.Submit(direct.Request{Op: direct.OpWrite, Buf: b, Off: int64(i * blk), Token: uint64(i), Done: done}); err != nil {
						t.Error(err)
						return
					}
					c := q.Await(done)
					if c.Err != nil {
						t.Error(c.Err)
						return
					}
					mu.Lock()
					written = i + 1
					mu.Unlock()
				}
			})
			for g := range 3 {
				wg.Go(func() {
					done := make(chan direct.Completion, 1)
					b, err := aligned.New(blk, f.Alignment().Memory)
					if err != nil {
						t.Error(err)
						return
					}
					defer b.Free()
					r := rand.New(rand.NewPCG(uint64(g), 9))
					for range 200 {
						mu.Lock()
						n := written
						mu.Unlock()
						if n == 0 {
							continue
						}
						i := r.IntN(n)
						if err := q.Submit(direct.Request{Op: direct.OpRead, Buf: b.Bytes(), Off: int64(i * blk), Token: uint64(i), Done: done}); err != nil {
							t.Error(err)
							return
						}
						c := q.Await(done)
						if c.Err != nil || c.N != blk || c.Token != uint64(i) || b.Bytes()[0] != pattern(i) || b.Bytes()[blk-1] != pattern(i) {
							t.Errorf("reader %d, block %d: %+v, first byte %d", g, i, c, b.Bytes()[0])
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}
