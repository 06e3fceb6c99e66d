package appender

import (
	"bytes"
	"context"
	"encoding/binary"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
)

// Tests of the failures the Appender survives (retry.go), on the fake.

// failWhile fails every write and fdatasync with errno while *on is set.
func failWhile(on *bool, errno syscall.Errno) func(request) error {
	return func(request) error {
		if *on {
			return errno
		}
		return nil
	}
}

// TestFakeRecordWithdrawn: a record whose write fails half-way through
// the ring is withdrawn whole: Size goes back to its start, and once the
// cause is gone the records that follow land where it would have, so the
// file holds exactly the records WriteRecord acknowledged.
func TestFakeRecordWithdrawn(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EIO} {
		t.Run(errno.Error(), func(t *testing.T) {
			f := newFake(512, 512, true)
			full := false
			f.fail = failWhile(&full, errno)
			a := newOnFake(t, f, Options{BufferSize: 4 * kib, Buffers: 4, MaxWrite: 8 * kib})
			var want []byte
			record := func(i int) error {
				var hdr [4]byte
				p := stream(1000+i*37%3000, byte(i))
				binary.BigEndian.PutUint32(hdr[:], uint32(len(p)))
				off, err := a.WriteRecord(hdr[:], p)
				if err != nil {
					require.Equal(t, int64(len(want)), a.Size(), "record %d withdrawn whole", i)
					return err
				}
				require.Equal(t, int64(len(want)), off)
				want = append(append(want, hdr[:]...), p...)
				return nil
			}
			for i := range 20 {
				require.NoError(t, record(i))
			}
			require.NoError(t, a.Sync())
			full = true
			var err error
			i := 20
			for ; err == nil; i++ {
				err = record(i)
			}
			require.ErrorIs(t, err, errno)
			require.NoError(t, a.Err(), "not sticky")
			for k := range 3 {
				require.ErrorIs(t, record(i+k), errno, "refused while the cause stands")
			}
			require.ErrorIs(t, a.Sync(), errno)
			full = false
			for k := range 30 {
				require.NoError(t, record(i+3+k), "writing goes on")
			}
			require.NoError(t, a.Close())
			assert.True(t, bytes.Equal(want, f.data), "the file holds exactly the records acknowledged: %d bytes, want %d", len(f.data), len(want))
			assert.Equal(t, int64(len(want)), a.Synced())
		})
	}
}

// TestFakeWriteKeepsCounted: io.Writer's count is the promise: the bytes
// Write counted before it failed are written once the cause is gone.
func TestFakeWriteKeepsCounted(t *testing.T) {
	f := newFake(512, 4096, true)
	full := false
	f.fail = failWhile(&full, syscall.ENOSPC)
	a := newOnFake(t, f, Options{BufferSize: 8 * kib, Buffers: 2})
	want := stream(20*kib, 1)
	write(t, a, want)
	full = true
	var err error
	for err == nil {
		var n int
		p := stream(3000, byte(len(want)))
		n, err = a.Write(p)
		want = append(want, p[:n]...)
	}
	require.ErrorIs(t, err, syscall.ENOSPC)
	full = false
	require.NoError(t, a.Sync())
	assert.Equal(t, int64(len(want)), a.Synced())
	require.NoError(t, a.Close())
	assert.True(t, bytes.Equal(want, f.data))
}

// TestFakeGrowAheadENOSPC: growing ahead that meets ENOSPC asks for what
// the write needs, and when even that fails lets the write extend the
// file: the caller never sees the fallocate's error while the data fits,
// and Close still cuts the file to the logical size.
func TestFakeGrowAheadENOSPC(t *testing.T) {
	f := newFake(512, 512, true)
	f.allocate = func(off, n int64) error {
		if n > 8*kib {
			return syscall.ENOSPC
		}
		return nil
	}
	a := newOnFake(t, f, Options{BufferSize: 4 * kib, Buffers: 4})
	want := stream(6000, 2)
	write(t, a, want)
	require.NoError(t, a.Sync())
	assert.Equal(t, []string{"allocate 0+1048576", "allocate 0+6144", "sync"}, f.calls, "shrunk to what the write needs")

	f.allocate = func(off, n int64) error { return syscall.ENOSPC }
	more := stream(50*kib, 3)
	write(t, a, more)
	want = append(want, more...)
	require.NoError(t, a.Sync(), "a failed preallocation is not the caller's error")
	require.NoError(t, a.Close())
	assert.True(t, bytes.Equal(want, f.data))
	assert.Contains(t, f.calls, "truncate 57200", "cut to the logical size though growing ahead failed")
}

// TestFakeSyncFailsRewrites: a failed fdatasync keeps every byte past
// Synced; the next Sync writes them again, from the block holding Synced,
// before it fdatasyncs.
func TestFakeSyncFailsRewrites(t *testing.T) {
	for _, dio := range []bool{true, false} {
		f := newFake(512, 512, dio)
		a := newOnFake(t, f, Options{BufferSize: 4 * kib, Buffers: 4})
		want := stream(10_000, 4)
		write(t, a, want)
		require.NoError(t, a.Sync())
		more := stream(6000, 5)
		write(t, a, more)
		want = append(want, more...)
		failing := true
		f.fail = func(r request) error {
			if r.op == direct.OpSync && failing {
				return syscall.EIO
			}
			return nil
		}
		require.ErrorIs(t, a.Sync(), syscall.EIO)
		assert.Equal(t, int64(10_000), a.Synced())
		// The fake's disk lost what the failed fdatasync covered.
		f.data = f.data[:aligned.Down(10_000, 512)]
		failing = false
		before := len(f.q.writes())
		require.NoError(t, a.Sync())
		var lo, hi int64 = 1 << 40, 0
		for _, w := range f.q.writes()[before:] {
			lo, hi = min(lo, w.off), max(hi, w.off+int64(w.n))
		}
		assert.LessOrEqual(t, lo, int64(aligned.Down(10_000, 512)), "direct=%v: written again from Synced", dio)
		assert.GreaterOrEqual(t, hi, int64(16_000))
		require.NoError(t, a.Close())
		assert.True(t, bytes.Equal(want, f.data), "direct=%v", dio)
	}
}

// TestFakeSyncFailsGoneSticky: a failed fdatasync after the ring went
// round since the last Sync, so that some bytes past Synced are no
// longer in the buffers to write again, is sticky with O_DIRECT as
// through the page cache: a device whose flush failed may have lost
// writes that completed, and a retried fdatasync would succeed without
// them.
func TestFakeSyncFailsGoneSticky(t *testing.T) {
	for _, dio := range []bool{true, false} {
		f := newFake(512, 512, dio)
		a := newOnFake(t, f, Options{BufferSize: 4 * kib, Buffers: 4})
		write(t, a, stream(10_000, 7))
		require.NoError(t, a.Sync())
		write(t, a, stream(64*kib, 8)) // far more than 4 buffers of 4 KiB
		f.fail = func(r request) error {
			if r.op == direct.OpSync {
				return syscall.EIO
			}
			return nil
		}
		require.ErrorIs(t, a.Sync(), syscall.EIO)
		f.fail = nil
		err := a.Sync()
		require.ErrorIs(t, err, syscall.EIO, "direct=%v: the retried Sync", dio)
		assert.Contains(t, err.Error(), "no longer in memory", "direct=%v", dio)
		assert.Equal(t, int64(10_000), a.Synced(), "direct=%v", dio)
	}
}

// TestFakeRetryPolicy: under a RetryPolicy a failure is reported to
// OnRetry and retried, not returned, until the cause passes; when its
// Context ends first, the call returns the last failure and the bytes are
// still held.
func TestFakeRetryPolicy(t *testing.T) {
	f := newFake(512, 512, true)
	fails := 3
	f.fail = func(r request) error {
		if fails > 0 {
			fails--
			return syscall.ENOSPC
		}
		return nil
	}
	var seen []error
	a := newOnFake(t, f, Options{BufferSize: 4 * kib, Buffers: 4, Retry: &RetryPolicy{
		OnRetry:  func(err error) { seen = append(seen, err) },
		MinDelay: time.Millisecond,
	}})
	want := stream(30*kib, 6)
	write(t, a, want)
	require.NoError(t, a.Sync(), "retried until the cause passed")
	// Failures reaped while writing again are written again at once,
	// not reported: at most one report per failed request.
	assert.NotEmpty(t, seen)
	assert.LessOrEqual(t, len(seen), 3)
	for _, err := range seen {
		assert.ErrorIs(t, err, syscall.ENOSPC)
	}

	// The Context ends at the third report, not after a time, so that a
	// loaded machine cannot make the count fall short.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a.retry.Context = ctx
	a.retry.OnRetry = func(err error) {
		if seen = append(seen, err); len(seen) == 3 {
			cancel()
		}
	}
	full := true
	f.fail = failWhile(&full, syscall.ENOSPC)
	seen = nil
	more := stream(10*kib, 7)
	start := time.Now()
	n, err := a.Write(more)
	want = append(want, more[:n]...)
	if err == nil {
		err = a.Sync()
	}
	require.ErrorIs(t, err, syscall.ENOSPC, "returned once the Context ended")
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.ErrorIs(t, ctx.Err(), context.Canceled)
	assert.Len(t, seen, 3, "every failure reported until the Context ended")
	full = false
	require.NoError(t, a.Close(), "the bytes were still held")
	assert.True(t, bytes.Equal(want, f.data))
}
