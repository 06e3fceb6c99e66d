package appender

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/testenv"
)

// recorder is an Injector that records every write the engine makes and
// slows each one down, so that full buffers pile up behind the device and
// have a chance to merge. It can fail the write at one offset.
type recorder struct {
	mu     sync.Mutex
	writes []span
	delay  time.Duration
	failAt int64 // fail the first write covering this offset with EIO; -1: never
}

type span struct {
	off int64
	n   int
}

func (r *recorder) Inject(op direct.Op, off int64, n int) (direct.Fault, bool) {
	if op != direct.OpWrite {
		return direct.Fault{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, span{off, n})
	if r.failAt >= off && r.failAt < off+int64(n) {
		r.failAt = -1
		return direct.Fault{Err: syscall.EIO}, true
	}
	return direct.Fault{Delay: r.delay}, r.delay > 0
}

func (r *recorder) spans() []span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.writes)
}

func open(t *testing.T, p fallback.Policy) (fallback.File, string) {
	t.Helper()
	path := filepath.Join(testenv.Dir(t), "append")
	f, err := fallback.Open(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600, p)
	require.NoError(t, err)
	return f, path
}

// fill appends size bytes in chunks of 1 to 300 bytes and returns them.
func fill(t *testing.T, a *Appender, size int, seed uint64) []byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed))
	want := make([]byte, 0, size)
	for len(want) < size {
		p := make([]byte, min(1+rng.IntN(300), size-len(want)))
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		n, err := a.Write(p)
		require.NoError(t, err)
		require.Equal(t, len(p), n)
		want = append(want, p...)
	}
	return want
}

// TestMergedWrites: neighbouring full buffers go out as one write of up to
// MaxWrite bytes, also while the device lags behind the writer, never
// across the end of the slab, and the file still holds exactly the stream.
func TestMergedWrites(t *testing.T) {
	for _, p := range testenv.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			f, path := open(t, p)
			const bufSize, maxWrite = 4096, 16384
			rec := &recorder{delay: 2 * time.Millisecond, failAt: -1}
			a, err := New(fallback.WithFaults(f, rec), Options{BufferSize: bufSize, Buffers: 8, MaxWrite: maxWrite})
			require.NoError(t, err)
			want := fill(t, a, 1<<20+123, 1)
			require.NoError(t, a.Close())

			got, err := os.ReadFile(path)
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, got), "file differs from the stream")

			ws := rec.spans()
			merged := 0
			for _, w := range ws {
				assert.LessOrEqual(t, w.n, maxWrite, "write at %d", w.off)
				if w.n > bufSize {
					merged++
				}
				// Eight slots of 4 KiB: a merged write never wraps.
				slot := w.off / bufSize % 8
				assert.LessOrEqual(t, slot*bufSize+int64(w.n), int64(8*bufSize), "write at %d crosses the end of the slab", w.off)
			}
			if f.Mode().Direct {
				assert.Greater(t, merged, len(ws)/2, "most writes should be merged: %v", ws[:min(len(ws), 20)])
			} else {
				assert.Zero(t, merged, "writes to the page cache are not merged")
			}
			t.Logf("%d writes, %d merged, for %d bytes", len(ws), merged, len(want))
		})
	}
}

// TestWritesCoverStream: the writes cover the file from 0 with no gap, and a flush in the middle of a
// pending run writes the run and the partial buffer.
func TestWritesCoverStream(t *testing.T) {
	f, path := open(t, fallback.Auto)
	align := f.Alignment().Offset
	rec := &recorder{failAt: -1}
	a, err := New(fallback.WithFaults(f, rec), Options{BufferSize: 8192, Buffers: 6, MaxWrite: 24576})
	require.NoError(t, err)
	var want []byte
	for i := range 40 {
		want = append(want, fill(t, a, 7000+i*977, uint64(i))...)
		if i%3 == 0 {
			require.NoError(t, a.Flush())
		}
	}
	require.NoError(t, a.Close())
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got))

	ws := rec.spans()
	slices.SortFunc(ws, func(a, b span) int { return int(a.off - b.off) })
	covered := int64(0)
	for _, w := range ws {
		require.Zero(t, w.off%int64(align), "write at %d is not aligned", w.off)
		require.LessOrEqual(t, w.off, covered, "gap before %d", w.off)
		covered = max(covered, w.off+int64(w.n))
	}
	assert.GreaterOrEqual(t, covered, int64(len(want)))
}

// TestSharedPoolDoesNotMerge: buffers lent by a pool are not neighbours in
// memory, so each is written alone.
func TestSharedPoolDoesNotMerge(t *testing.T) {
	f, path := open(t, fallback.Auto)
	pool, err := aligned.NewPool(4096, 4096, 8*4096)
	require.NoError(t, err)
	defer pool.Close()
	rec := &recorder{delay: time.Millisecond, failAt: -1}
	a, err := New(fallback.WithFaults(f, rec), Options{Pool: pool, Buffers: 8})
	require.NoError(t, err)
	want := fill(t, a, 200_000, 2)
	require.NoError(t, a.Close())
	assert.Zero(t, pool.Stats().InUse)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got))
	for _, w := range rec.spans() {
		require.LessOrEqual(t, w.n, 4096)
	}
}

// TestMergedWriteFails: an EIO on a merged write, or on a pool buffer's
// write, is returned once and costs nothing: the next Write writes the
// lost buffers again, and Close leaves exactly the bytes Write counted,
// every buffer back in the pool.
func TestMergedWriteFails(t *testing.T) {
	for _, p := range testenv.Policies() {
		for _, shared := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/pool=%v", p, shared), func(t *testing.T) {
				testWriteFails(t, p, shared)
			})
		}
	}
}

func testWriteFails(t *testing.T, p fallback.Policy, shared bool) {
	f, path := open(t, p)
	rec := &recorder{delay: time.Millisecond, failAt: 100_000}
	o := Options{BufferSize: 4096, Buffers: 8, MaxWrite: 16384}
	if shared {
		pool, err := aligned.NewPool(4096, 4096, 8*4096)
		require.NoError(t, err)
		defer func() {
			assert.Zero(t, pool.Stats().InUse, "the buffers went back to the pool")
			pool.Close()
		}()
		o.Pool = pool
	}
	a, err := New(fallback.WithFaults(f, rec), o)
	require.NoError(t, err)
	var want []byte
	var werr error
	for i := 0; i < 1000 && werr == nil; i++ {
		chunk := bytes.Repeat([]byte{byte(i) | 1}, 1000)
		var n int
		n, werr = a.Write(chunk)
		want = append(want, chunk[:n]...)
	}
	if werr == nil {
		werr = a.Flush()
	}
	require.ErrorIs(t, werr, syscall.EIO)
	require.NoError(t, a.Err(), "EIO is not sticky")
	more := bytes.Repeat([]byte{0xee}, 50_000)
	n, err := a.Write(more)
	require.NoError(t, err, "the cause is gone: the lost buffers are written again")
	want = append(want, more[:n]...)
	require.NoError(t, a.Close())
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "the file holds every byte Write counted: %d, want %d", len(got), len(want))
}

// TestDefaults: the default ring holds two merged writes, MaxWrite is at
// most half the ring, and writes to the page cache are not merged.
func TestDefaults(t *testing.T) {
	f, _ := open(t, fallback.Auto)
	defer f.Close()
	type want struct{ buffers, merged int }
	for _, c := range []struct {
		o                 Options
		direct, pageCache want
	}{
		{Options{}, want{2 * DefaultMaxWrite / aligned.DefaultBufferSize, DefaultMaxWrite / aligned.DefaultBufferSize}, want{DefaultBuffers, 1}},
		{Options{BufferSize: 8192}, want{2 * DefaultMaxWrite / 8192, DefaultMaxWrite / 8192}, want{DefaultBuffers, 1}},
		{Options{BufferSize: 1 << 20}, want{DefaultBuffers, 1}, want{DefaultBuffers, 1}},
		{Options{Buffers: 2}, want{2, 1}, want{2, 1}},
		{Options{Buffers: 3, MaxWrite: 1 << 30}, want{3, 1}, want{3, 1}},
	} {
		a, err := New(f, c.o)
		require.NoError(t, err)
		w := c.pageCache
		if f.Mode().Direct {
			w = c.direct
		}
		assert.Equal(t, w.buffers, len(a.slots), "%+v", c.o)
		assert.Equal(t, w.merged, a.mergeSlots, "%+v", c.o)
		assert.Equal(t, (w.buffers+w.merged-1)/w.merged, a.q.Depth(), "a write in flight per merged write the ring holds: %+v", c.o)
		a.release()
	}

	// A file on a shared pool takes at most DefaultBuffers of it, unmerged.
	pool, err := aligned.NewPool(aligned.DefaultBufferSize, 4096, 64*aligned.DefaultBufferSize)
	require.NoError(t, err)
	defer pool.Close()
	a, err := New(f, Options{Pool: pool})
	require.NoError(t, err)
	assert.Equal(t, DefaultBuffers, cap(a.slots))
	assert.Equal(t, 1, a.mergeSlots)
	for range 3 * DefaultBuffers {
		_, err := a.Write(make([]byte, aligned.DefaultBufferSize))
		require.NoError(t, err)
	}
	assert.Equal(t, DefaultBuffers, pool.Stats().InUse, "the file holds no more than its ring")
	a.release()
	assert.Zero(t, pool.Stats().InUse)
}
