package ephemeral_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/ephemeral"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/faults"
	"github.com/dio-storage/dio/internal/testenv"
)

// alignmentIn returns the offset alignment of an O_DIRECT file in dir,
// or 1 when f reads through the page cache.
func alignmentIn(t *testing.T, dir string, f *ephemeral.File) int64 {
	t.Helper()
	if !f.Mode().Direct {
		return 1
	}
	p, err := direct.Open(filepath.Join(dir, "probe"), os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	defer p.Close()
	return int64(p.Alignment().Offset)
}

// TestStatsExact writes blobs of known sizes through each I/O policy,
// flushes and syncs, and reads them back: the File's write counts match
// the padded tail a Flush writes and the Sync after writes again from its
// block; reads its buffers serve cost the device nothing, and a read
// from the disk costs its aligned range.
func TestStatsExact(t *testing.T) {
	for _, p := range []fallback.Policy{fallback.Auto, fallback.DirectPwrite, fallback.StdFS} {
		t.Run(p.String(), func(t *testing.T) {
			dir := testenv.Dir(t)
			f, err := ephemeral.Create(dir, &ephemeral.Options{IO: p, BufferSize: 64 << 10, Buffers: 4})
			if p == fallback.DirectPwrite && err != nil {
				t.Skip(err)
			}
			require.NoError(t, err)
			defer f.Close()
			al := alignmentIn(t, dir, f)
			blob := make([]byte, 1000)
			const ext = 4 + 1000 // a blob's header and payload
			for range 3 {
				_, err := f.WriteBlob(blob)
				require.NoError(t, err)
			}
			// In the writer's buffer still: no device read.
			_, err = f.ReadBlob(ext, nil)
			require.NoError(t, err)
			_, err = f.ReadAt(make([]byte, 100), 2000)
			require.NoError(t, err)
			assert.Equal(t, direct.ReaderStats{Reads: 2, Bytes: ext + 100}, f.Stats().Read)

			require.NoError(t, f.Flush())       // 3 blobs: the tail padded
			_, err = f.Write(make([]byte, ext)) // raw bytes, a blob's worth
			require.NoError(t, err)
			require.NoError(t, f.Sync()) // from the block the tail began in, and an fdatasync
			s := f.Stats()
			dev := uint64(aligned.Up(3*ext, al) + aligned.Up(4*ext, al) - aligned.Down(3*ext, al))
			if !f.Mode().Direct {
				dev = 4 * ext
			}
			assert.Equal(t, direct.WriterStats{Writes: 4, Bytes: 4 * ext, DeviceBytes: dev, Syncs: 1, SyncLatency: s.Write.SyncLatency}, s.Write)
			assert.Equal(t, uint64(1), s.Write.SyncLatency.Count())

			// Final on disk: a random read of at least 8 KiB from the
			// header's block, here to the end of the file's bytes but for
			// the padded tail block, which the next flush writes again
			// and memory serves till then (the ReadAt, from that read's
			// buffer or the tail).
			_, err = f.ReadBlob(ext, nil)
			require.NoError(t, err)
			_, err = f.ReadAt(make([]byte, 100), 3850)
			require.NoError(t, err)
			want := uint64(min(aligned.Up(ext+8<<10, al), aligned.Down(4*ext, al)) - aligned.Down(ext, al))
			assert.Equal(t, direct.ReaderStats{Reads: 2, Bytes: ext + 100, DeviceBytes: want}, f.Stats().Sub(s).Read, "alignment %d", al)
			t.Logf("%v: alignment %d, read %+v", f.Mode(), al, f.Stats().Read)
		})
	}
}

// TestSlowFile plants a slow write under a File: it is reported while
// in flight, once, with its offset and length; a threshold nothing
// reaches reports nothing; a bad policy is refused.
func TestSlowFile(t *testing.T) {
	// The planted fault is a write. A real fdatasync under -race on a
	// loaded CI machine can outlast a threshold short enough for a test
	// and is rightly reported: syncs are left out of what it counts.
	const threshold = 150 * time.Millisecond
	dir := testenv.Dir(t)
	reports := make(chan direct.SlowIO, 8)
	slow := &direct.SlowPolicy{Threshold: threshold, Report: func(s direct.SlowIO) {
		if s.Op != direct.OpSync {
			reports <- s
		}
	}}
	f, err := ephemeral.Create(dir, &ephemeral.Options{Slow: slow, Faults: faults.NewPlan(faults.Late(direct.OpWrite, 1, 10*threshold))})
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteBlob(make([]byte, 1000))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- f.Flush() }()
	select {
	case r := <-reports:
		select {
		case err := <-done:
			t.Fatalf("reported after Flush returned (%v)", err)
		default:
		}
		assert.Equal(t, direct.OpWrite, r.Op)
		assert.True(t, strings.HasPrefix(r.Name, dir), r.Name)
		assert.Equal(t, int64(0), r.Off)
		assert.Equal(t, int(aligned.Up(1004, alignmentIn(t, dir, f))), r.Len)
	case err := <-done:
		t.Fatalf("Flush returned (%v) without a report", err)
	}
	require.NoError(t, <-done)
	_, err = f.WriteBlob(make([]byte, 1000))
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	time.Sleep(2 * threshold)
	assert.Empty(t, reports, "reported twice, or an operation below the threshold")

	g, err := ephemeral.Create(dir, &ephemeral.Options{Slow: &direct.SlowPolicy{Threshold: time.Minute, Report: slow.Report},
		Faults: faults.NewPlan(faults.Late(direct.OpWrite, 1, 2*threshold))})
	require.NoError(t, err)
	_, err = g.Write(make([]byte, 100))
	require.NoError(t, err)
	require.NoError(t, g.Sync())
	require.NoError(t, g.Close())
	assert.Empty(t, reports)

	_, err = ephemeral.Create(dir, &ephemeral.Options{Slow: &direct.SlowPolicy{Threshold: time.Second}})
	assert.ErrorIs(t, err, ephemeral.ErrInvalidOptions)
}
