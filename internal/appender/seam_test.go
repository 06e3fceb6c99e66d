package appender

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
)

// Tests of the Appender's logic on the disk-free fake (fake_test.go):
// they assert on the requests it submits and the calls it makes.

const kib = 1 << 10

// stream returns n bytes that tell their offset apart.
func stream(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7) ^ byte(i>>8) ^ seed | 1 // never 0x00: padding is
	}
	return p
}

func newOnFake(t *testing.T, f *fakeFile, o Options) *Appender {
	t.Helper()
	a, err := New(f, o)
	require.NoError(t, err)
	return a
}

func write(t *testing.T, a *Appender, p []byte) {
	t.Helper()
	n, err := a.Write(p)
	require.NoError(t, err)
	require.Equal(t, len(p), n)
}

// checkData asserts that every write carried the stream's bytes from its
// offset on, then zeros of padding, less than align of them.
func checkData(t *testing.T, ws []request, want []byte, align int) {
	t.Helper()
	for _, w := range ws {
		k := 0
		for k < len(w.data) && w.off+int64(k) < int64(len(want)) && w.data[k] == want[w.off+int64(k)] {
			k++
		}
		if pad := w.data[k:]; len(pad) >= align || bytes.Count(pad, []byte{0}) != len(pad) {
			t.Fatalf("write %v: %d bytes of the stream, then %d not all zero or more than %d of padding", w, k, len(pad), align)
		}
	}
}

// TestFakeMergedWrites: full neighbouring buffers go out as one merged
// write of MaxWrite bytes, cut where the ring is cut (every MaxWrite
// bytes) and at the end of the slab; the queue is as deep as the ring
// holds merged writes.
func TestFakeMergedWrites(t *testing.T) {
	for _, c := range []struct {
		name    string
		buffers int
		spans   []int // lengths of the writes of three rings' worth, in KiB
	}{
		// 8 buffers of 4 KiB, MaxWrite 16 KiB: two merged writes per ring.
		{"whole ring", 8, []int{16, 16, 16, 16, 16, 16}},
		// 5 buffers: two merged writes, then the slab's last buffer alone.
		{"end of slab", 5, []int{8, 8, 4, 8, 8, 4, 8, 8, 4}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(512, 512, true)
			maxWrite := 16 * kib
			if c.buffers == 5 {
				maxWrite = 8 * kib
			}
			a := newOnFake(t, f, Options{BufferSize: 4 * kib, Buffers: c.buffers, MaxWrite: maxWrite})
			assert.Equal(t, (c.buffers+maxWrite/(4*kib)-1)/(maxWrite/(4*kib)), a.q.Depth())
			want := stream(3*c.buffers*4*kib, 1)
			for p := want; len(p) > 0; p = p[min(len(p), 1000):] {
				write(t, a, p[:min(len(p), 1000)])
			}
			var got []int
			off := int64(0)
			for _, w := range f.q.writes() {
				assert.Equal(t, off, w.off, "writes follow each other")
				off += int64(w.n)
				got = append(got, w.n/kib)
			}
			assert.Equal(t, c.spans, got)
			checkData(t, f.q.writes(), want, 512)
			require.NoError(t, a.Close())
			assert.Equal(t, want, f.data)
		})
	}
}

// TestFakeWrapAfterFlush: a run that starts in the slab's last buffer
// (where a Flush left the filling one) goes out alone when the ring
// wraps, even with the first buffer free: a merged write is contiguous
// in memory.
func TestFakeWrapAfterFlush(t *testing.T) {
	f := newFake(512, 512, true)
	a := newOnFake(t, f, Options{BufferSize: 4 * kib, Buffers: 5, MaxWrite: 8 * kib})
	want := stream(40*kib, 13)
	write(t, a, want[:18*kib]) // four buffers and half the fifth
	require.NoError(t, a.Flush())
	write(t, a, want[18*kib:])
	require.NoError(t, a.Flush())
	assert.Equal(t, []string{
		"0+8192", "8192+8192", "16384+2048", // the Flush
		"18432+4096", // the fifth buffer, refitted, alone: the ring wraps
		"22528+8192", "30720+8192", "38912+2048",
	}, f.q.spans())
	checkData(t, f.q.writes(), want, 512)
}

// TestFakeNoMerge: through the page cache, and with a shared pool's
// buffers, every write is one buffer.
func TestFakeNoMerge(t *testing.T) {
	pool, err := aligned.NewPool(4*kib, 4*kib, 8*4*kib)
	require.NoError(t, err)
	defer pool.Close()
	for _, c := range []struct {
		name   string
		direct bool
		pool   *aligned.Pool
	}{{"page cache", false, nil}, {"pool", true, pool}} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(512, 512, c.direct)
			a := newOnFake(t, f, Options{BufferSize: 4 * kib, Buffers: 8, MaxWrite: 16 * kib, Pool: c.pool})
			want := stream(64*kib, 2)
			write(t, a, want)
			ws := f.q.writes()
			require.Len(t, ws, 16)
			for i, w := range ws {
				assert.Equal(t, int64(i*4*kib), w.off)
				assert.Equal(t, 4*kib, w.n)
			}
			checkData(t, ws, want, 512)
			require.NoError(t, a.Close())
			assert.Equal(t, want, f.data)
			if !c.direct {
				assert.NotContains(t, f.calls, "allocate 0+1048576", "the page cache is not grown ahead")
			}
		})
	}
}

// TestFakeHeldMerge: with the device slow (completions on demand), the
// run pending when the Appender must wait goes out before it waits, so a
// merged write never waits for the ring to fill; and no more writes are
// in flight than the queue is deep.
func TestFakeHeldMerge(t *testing.T) {
	f := newFake(512, 512, true)
	f.hold = true
	a := newOnFake(t, f, Options{BufferSize: 4 * kib, Buffers: 8, MaxWrite: 16 * kib})
	want := stream(40*kib, 3)
	write(t, a, want)
	require.NoError(t, a.Flush())
	assert.Equal(t, []string{"0+16384", "16384+16384", "32768+8192"}, f.q.spans())
	assert.LessOrEqual(t, f.q.maxHeld, a.q.Depth())
	checkData(t, f.q.writes(), want, 512)
}

// TestFakePadAndRefit: a Sync writes the partial last block padded with
// zeros to the offset alignment, not to the buffer size; the next flush
// rewrites that block, with the tail refitted to the front of the
// buffer, and only from it: the aligned part before it is not written
// again. Close truncates the file to the logical size.
func TestFakePadAndRefit(t *testing.T) {
	for _, align := range []int{512, 4096} {
		t.Run(fmt.Sprint(align), func(t *testing.T) {
			f := newFake(512, align, true)
			a := newOnFake(t, f, Options{BufferSize: 64 * kib})
			want := stream(align+100, 4)

			write(t, a, want[:100])
			require.NoError(t, a.Sync())
			write(t, a, want[100:align+10])
			require.NoError(t, a.Sync())
			write(t, a, want[align+10:])
			require.NoError(t, a.Sync())
			assert.Equal(t, int64(align+100), a.Synced())

			up := func(n int) string { return fmt.Sprint(aligned.Up(n, align)) }
			assert.Equal(t, []string{
				"0+" + up(100),                    // the first tail, padded
				"0+" + up(align+10),               // its block rewritten, and the next one's start
				fmt.Sprint(align) + "+" + up(100), // only the last block again
			}, f.q.spans())
			checkData(t, f.q.writes(), want, align)
			for _, r := range f.q.reqs {
				assert.NotEqual(t, direct.OpSync, r.op, "fdatasync runs in the caller's thread, not on the queue")
			}
			assert.Equal(t, []string{"allocate 0+1048576", "sync", "sync", "sync"}, f.calls, "a fdatasync per Sync, which keeps what was grown ahead")

			require.NoError(t, a.Close())
			assert.Equal(t, []string{"allocate 0+1048576", "sync", "sync", "sync", fmt.Sprintf("truncate %d", align+100), "sync", "close"}, f.calls, "Close fdatasyncs after the truncate")
			assert.Equal(t, want, f.data)
		})
	}
}

// TestFakeGrowth: the file grows ahead in steps that double from 1 MiB;
// growing falls back to what the write needs on ENOSPC, and to Truncate
// where Allocate is not supported.
func TestFakeGrowth(t *testing.T) {
	f := newFake(512, 512, true)
	a := newOnFake(t, f, Options{BufferSize: 64 * kib})
	write(t, a, stream(5<<20, 5))
	assert.Equal(t, []string{
		"allocate 0+1048576", "allocate 1048576+1048576",
		"allocate 2097152+2097152", "allocate 4194304+4194304",
	}, f.calls)
	require.NoError(t, a.Close())
	assert.Equal(t, []string{"truncate 5242880", "sync", "close"}, f.calls[len(f.calls)-3:])

	f = newFake(512, 512, true)
	f.allocate = func(off, n int64) error {
		if n > 64*kib {
			return syscall.ENOSPC
		}
		return nil
	}
	a = newOnFake(t, f, Options{BufferSize: 64 * kib, Buffers: 2})
	write(t, a, stream(128*kib, 6))
	assert.Equal(t, []string{"allocate 0+1048576", "allocate 0+65536", "allocate 65536+1048576", "allocate 65536+65536"}, f.calls)
	require.NoError(t, a.Close())

	f = newFake(512, 512, true)
	f.allocate = func(off, n int64) error { return fmt.Errorf("fallocate: %w", errors.ErrUnsupported) }
	a = newOnFake(t, f, Options{BufferSize: 64 * kib, Buffers: 2})
	write(t, a, stream(64*kib, 7))
	assert.Equal(t, []string{"allocate 0+1048576", "truncate 1048576"}, f.calls)
	require.NoError(t, a.Close())
}

// TestFakeFailedWriteCached: the bytes of a failed write stay in memory
// (Cached returns them), every call fails while the cause stands, and
// Close, which tries once more, cuts the file back to Synced and makes
// the cut durable.
func TestFakeFailedWriteCached(t *testing.T) {
	f := newFake(512, 512, true)
	a := newOnFake(t, f, Options{BufferSize: 4 * kib, Buffers: 4})
	want := stream(1000, 8)
	write(t, a, want)
	require.NoError(t, a.Sync())

	f.fail = func(r request) error {
		if r.op == direct.OpWrite && r.off <= 4*kib && 4*kib < r.off+int64(r.n) {
			return syscall.EIO
		}
		return nil
	}
	more := stream(12*kib, 9)
	want = append(want, more...)
	_, err := a.Write(more)
	if err == nil {
		err = a.Flush()
	}
	require.ErrorIs(t, err, syscall.EIO)
	_, err = a.Write([]byte{1})
	require.ErrorIs(t, err, syscall.EIO, "the write fails again while its cause stands")
	require.NoError(t, a.Err(), "and is not sticky")

	// The Sync refitted 1000 bytes to the block at 512, so the failed
	// write is the merged one of the first two buffers, 512+8192.
	ws := f.q.writes()
	require.Greater(t, len(ws), 3, "written again")
	lost := ws[1]
	require.Equal(t, "512+8192", fmt.Sprintf("%d+%d", lost.off, lost.n))
	for off := lost.off; off < lost.off+int64(lost.n); {
		mem, _ := a.Cached(off)
		require.NotEmpty(t, mem, "a failed write's bytes stay in memory: %d", off)
		require.Equal(t, want[off:off+int64(len(mem))], mem)
		off += int64(len(mem))
	}

	calls := len(f.calls)
	require.ErrorIs(t, a.Close(), syscall.EIO)
	assert.Equal(t, []string{"truncate 1000", "sync", "close"}, f.calls[calls:], "cut back to Synced, durably")
	assert.Equal(t, want[:1000], f.data)
}

// TestFakeFailedCloseSync: a Close whose fdatasync fails truncates to
// the logical size first, then cuts back to Synced.
func TestFakeFailedCloseSync(t *testing.T) {
	f := newFake(512, 512, true)
	a := newOnFake(t, f, Options{BufferSize: 4 * kib})
	want := stream(3000, 10)
	write(t, a, want[:1000])
	require.NoError(t, a.Sync())
	write(t, a, want[1000:])
	f.fail = func(r request) error {
		if r.op == direct.OpSync {
			return syscall.EIO
		}
		return nil
	}
	require.ErrorIs(t, a.Close(), syscall.EIO)
	assert.Equal(t, []string{"allocate 0+1048576", "sync", "truncate 3000", "sync", "truncate 1000", "sync", "close"}, f.calls)
	assert.Equal(t, want[:1000], f.data)
	assert.Equal(t, int64(1000), a.Synced())
}

// TestFakeResume: Resume cuts the file to the size, reads the unaligned
// last block back and rewrites it with the next flush, from the block's
// offset.
func TestFakeResume(t *testing.T) {
	f := newFake(512, 4096, true)
	want := stream(5000, 11)
	f.data = append(slices.Clone(want), make([]byte, 3000)...) // a zero tail grown ahead
	a, err := Resume(f, 5000, Options{BufferSize: 64 * kib})
	require.NoError(t, err)
	assert.Equal(t, []string{"truncate 5000"}, f.calls)
	more := stream(200, 12)
	write(t, a, more)
	want = append(want, more...)
	require.NoError(t, a.Close())
	assert.Equal(t, []string{"4096+4096"}, f.q.spans())
	checkData(t, f.q.writes(), want, 4096)
	assert.True(t, bytes.Equal(want, f.data))
}
