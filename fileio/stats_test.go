package fileio_test

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/faults"
	"github.com/dio-storage/dio/fileio"
	"github.com/dio-storage/dio/internal/testenv"
)

// TestStatsExact writes and reads known sizes through each I/O policy
// and checks the Writer's and the Reader's counts against what the test
// computes: the padded tail a Sync writes and the next flush writes
// again, the truncate at Close, reads rounded out to the alignment.
func TestStatsExact(t *testing.T) {
	for _, p := range []fallback.Policy{fallback.Auto, fallback.DirectPwrite, fallback.StdFS} {
		t.Run(p.String(), func(t *testing.T) {
			path := filepath.Join(testenv.Dir(t), "f")
			const buf = 64 << 10
			w, err := fileio.Create(path, &fileio.Options{IO: p, BufferSize: buf, NoDirSync: true})
			if p == fallback.DirectPwrite && err != nil {
				t.Skip(err)
			}
			require.NoError(t, err)
			al := int64(1)
			if w.Mode().Direct {
				f, err := direct.Open(path, os.O_RDONLY, 0)
				require.NoError(t, err)
				al = int64(f.Alignment().Offset)
				f.Close()
			}
			before := direct.Stats()
			rec := make([]byte, 1000)
			for range 3 {
				_, err := w.Write(rec)
				require.NoError(t, err)
			}
			require.NoError(t, w.Sync()) // 3000 bytes: the tail padded
			_, err = w.Write(rec)
			require.NoError(t, err)
			require.NoError(t, w.Close()) // the same buffer again, 4000 bytes, padded
			s := w.Stats()
			// With O_DIRECT the Sync writes the tail padded, and Close
			// the rest from the block the tail began in; through the page
			// cache each byte once.
			dev := uint64(aligned.Up(3000, al) + aligned.Up(4000, al) - aligned.Down(3000, al))
			if !w.Mode().Direct {
				dev = 4000
			}
			assert.Equal(t, fileio.WriterStats{Writes: 4, Bytes: 4000, DeviceBytes: dev, Syncs: 2, SyncLatency: s.SyncLatency}, s)
			assert.Equal(t, uint64(2), s.SyncLatency.Count())
			ps := direct.Stats().Sub(before).Paths[w.Mode().Path()]
			assert.Equal(t, uint64(4000), ps.Write.Asked)

			r, err := fileio.Open(path, &fileio.Options{IO: p})
			require.NoError(t, err)
			defer r.Close()
			p := make([]byte, 100)
			for _, off := range []int64{0, 1000, 3850} { // the last straddles a 512-byte block
				_, err := r.ReadAt(p, off)
				require.NoError(t, err)
			}
			// Each read rounded out to the alignment, the last cut by the
			// end of the file at 4000, which the device reads short.
			var want uint64
			for _, off := range []int64{0, 1000, 3850} {
				want += uint64(min(aligned.Up(off+100, al), 4000) - aligned.Down(off, al))
			}
			rs := r.Stats()
			assert.Equal(t, fileio.ReaderStats{Reads: 3, Bytes: 300, DeviceBytes: want}, rs, "alignment %d", al)
			t.Logf("%v: alignment %d, wrote %d bytes as %d, read %+v", w.Mode(), al, s.Bytes, s.DeviceBytes, rs)
		})
	}
}

// TestStatsRetried fails a write with ENOSPC once under a Retry policy:
// the buffer written again is counted once.
func TestStatsRetried(t *testing.T) {
	path := filepath.Join(testenv.Dir(t), "f")
	plan := faults.NewPlan(faults.Rule{Op: direct.OpWrite, Times: 1, Fault: direct.Fault{Err: syscall.ENOSPC}})
	w, err := fileio.Create(path, &fileio.Options{Faults: plan, NoDirSync: true,
		Retry: &fileio.RetryPolicy{MinDelay: time.Millisecond, MaxDelay: time.Millisecond}})
	require.NoError(t, err)
	_, err = w.Write(make([]byte, 64<<10))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	s := w.Stats()
	assert.Equal(t, uint64(1), s.Retries)
	assert.Equal(t, uint64(1), s.Writes)
}

// TestSlowWriter plants a slow fdatasync under a Writer: it is reported
// while in flight, once, naming the file.
func TestSlowWriter(t *testing.T) {
	path := filepath.Join(testenv.Dir(t), "f")
	reports := make(chan fileio.SlowIO, 8)
	w, err := fileio.Create(path, &fileio.Options{NoDirSync: true,
		Faults: faults.NewPlan(faults.Late(direct.OpSync, 1, 400*time.Millisecond)),
		Slow:   &fileio.SlowPolicy{Threshold: 40 * time.Millisecond, Report: func(s fileio.SlowIO) { reports <- s }}})
	require.NoError(t, err)
	_, err = w.Write([]byte("hello"))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- w.Sync() }()
	select {
	case r := <-reports:
		assert.Equal(t, direct.OpSync, r.Op)
		assert.Equal(t, path, r.Name)
		select {
		case <-done:
			t.Fatal("reported after the Sync returned")
		default:
		}
	case err := <-done:
		t.Fatalf("Sync returned (%v) without a report", err)
	}
	require.NoError(t, <-done)
	time.Sleep(100 * time.Millisecond)
	assert.Empty(t, reports, "reported twice")
	// Close's own fdatasync is real: under -race on a loaded CI machine
	// it can outlast the threshold and be reported, rightly.
	require.NoError(t, w.Close())

	_, err = fileio.Create(path+"2", &fileio.Options{Slow: &fileio.SlowPolicy{}})
	assert.ErrorIs(t, err, fileio.ErrInvalidOptions)
	_, err = os.Stat(path + "2")
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// TestStatsSequential counts a Sequential's calls as reads asked for,
// each with the bytes it asked for, and its read-ahead in DeviceBytes.
func TestStatsSequential(t *testing.T) {
	path := filepath.Join(testenv.Dir(t), "f")
	const size = 300_000
	require.NoError(t, os.WriteFile(path, make([]byte, size), 0o644))
	r, err := fileio.Open(path, nil)
	require.NoError(t, err)
	defer r.Close()

	// WriteTo (io.Copy) is one read of the rest of the file.
	s, err := r.NewSequential(1000)
	require.NoError(t, err)
	n, err := io.Copy(io.Discard, s)
	require.NoError(t, err)
	require.Equal(t, int64(size-1000), n)
	require.NoError(t, s.Close())
	rs := r.Stats()
	assert.Equal(t, uint64(1), rs.Reads)
	assert.Equal(t, uint64(size-1000), rs.Bytes)
	assert.GreaterOrEqual(t, rs.DeviceBytes, uint64(size-1000))
	assert.LessOrEqual(t, rs.DeviceBytes, uint64(size))

	// Read and ReadAt in order: each call with its len(p), the last Read
	// asking for more than the file holds, the Read at the end none.
	before := r.Stats()
	s, err = r.NewSequential(0)
	require.NoError(t, err)
	defer s.Close()
	p := make([]byte, 70_000)
	calls, asked := 0, 0
	for {
		_, err := s.Read(p)
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		calls, asked = calls+1, asked+len(p)
	}
	_, err = s.ReadAt(p[:100], 0) // out of order: the Reader's ReadAt
	require.NoError(t, err)
	_, err = s.ReadAt(p[:200], 100) // follows on: the read-ahead's
	require.NoError(t, err)
	d := r.Stats().Sub(before)
	assert.Equal(t, uint64(calls+2), d.Reads)
	assert.Equal(t, uint64(asked+300), d.Bytes)
	assert.GreaterOrEqual(t, d.DeviceBytes, uint64(size))
}
