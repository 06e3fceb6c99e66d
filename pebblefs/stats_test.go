//go:build unix

package pebblefs

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/faults"
	"github.com/dio-storage/dio/fileio"
	"github.com/dio-storage/dio/internal/testenv"
)

// alignmentIn returns the offset alignment O_DIRECT files in dir take,
// or 1 when there is none (the page cache).
func alignmentIn(t *testing.T, dir string) int64 {
	t.Helper()
	f, err := direct.Open(filepath.Join(dir, "probe"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return 1
	}
	defer f.Close()
	return int64(f.Alignment().Offset)
}

// TestStatsExact writes and reads one file through the vfs.File an FS
// hands Pebble, and checks the FS's counts against what the test
// computes (the padded tail a Sync writes and Close writes again, reads
// rounded out to the alignment), through StatsOf of the FS wrapped in
// vfs.WithDiskHealthChecks; and that a fresh file's reads are counted
// apart.
func TestStatsExact(t *testing.T) {
	dir := testenv.Dir(t)
	al := alignmentIn(t, dir)
	inner := New(&Options{FreshFiles: -1})
	fsys, closer := vfs.WithDiskHealthChecks(inner, time.Minute, nil, func(vfs.DiskSlowInfo) {})
	defer closer.Close()
	name := filepath.Join(dir, "000001.sst")
	f, err := fsys.Create(name, vfs.WriteCategoryUnspecified)
	require.NoError(t, err)
	rec := pattern(1, 1000)
	for range 3 {
		_, err := f.Write(rec)
		require.NoError(t, err)
	}
	require.NoError(t, f.Sync())
	_, err = f.Write(rec)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	s, ok := StatsOf(fsys)
	require.True(t, ok)
	dev := uint64(aligned.Up(3000, al) + aligned.Up(4000, al) - aligned.Down(3000, al))
	assert.Equal(t, fileio.WriterStats{Writes: 4, Bytes: 4000, DeviceBytes: dev, Syncs: 2, SyncLatency: s.Write.SyncLatency}, s.Write, "alignment %d", al)
	assert.Equal(t, uint64(2), s.Write.SyncLatency.Count())

	r, err := fsys.Open(name)
	require.NoError(t, err)
	p := make([]byte, 100)
	var want uint64
	for _, off := range []int64{0, 1000, 3850} {
		_, err := r.ReadAt(p, off)
		require.NoError(t, err)
		want += uint64(min(aligned.Up(off+100, al), 4000) - aligned.Down(off, al))
	}
	open, _ := StatsOf(fsys) // counted while the file is open
	require.NoError(t, r.Close())
	closed, _ := StatsOf(fsys) // and once it is closed
	assert.Equal(t, fileio.ReaderStats{Reads: 3, Bytes: 300, DeviceBytes: want}, open.Sub(s).Read)
	assert.Equal(t, open, closed)
	assert.Equal(t, closed, inner.(*FS).Stats())
	t.Logf("alignment %d: %+v", al, closed.Read)

	_, ok = StatsOf(vfs.Default)
	assert.False(t, ok)
	m, ok := MemoryOf(fsys) // through the wrapper, as StatsOf
	require.True(t, ok)
	assert.Equal(t, inner.(*FS).Memory().Buffers, m.Buffers)
	assert.Positive(t, m.Buffers, "the writes' and reads' buffers")
	_, ok = MemoryOf(vfs.Default)
	assert.False(t, ok)

	// Fresh files: the reads come from memory.
	fresh := New(nil)
	f, err = fresh.Create(name, vfs.WriteCategoryUnspecified)
	require.NoError(t, err)
	_, err = f.Write(rec)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	r, err = fresh.Open(name)
	require.NoError(t, err)
	_, err = r.ReadAt(p, 10)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	fs, _ := StatsOf(fresh)
	assert.Equal(t, fileio.ReaderStats{}, fs.Read)
	assert.Equal(t, [2]uint64{1, 100}, [2]uint64{fs.FreshReads, fs.FreshBytes})
}

// TestPebbleDiskHealth runs Pebble on pebblefs wrapped in
// vfs.WithDiskHealthChecks, writing with pebble.Sync: it works, the
// FS's counts (through the wrapper) show every synced commit, and
// neither the disk-health checks nor Options.Slow report anything below
// their thresholds.
func TestPebbleDiskHealth(t *testing.T) {
	dir := testenv.Dir(t)
	reports := make(chan string, 16)
	inner := New(&Options{Slow: &fileio.SlowPolicy{Threshold: 10 * time.Second,
		Report: func(s fileio.SlowIO) { reports <- "dio: " + s.String() }}})
	fsys, closer := vfs.WithDiskHealthChecks(inner, 10*time.Second, nil, func(i vfs.DiskSlowInfo) {
		reports <- "pebble: " + i.String()
	})
	defer closer.Close()
	db, err := pebble.Open(dir, pebbleOptions(fsys))
	require.NoError(t, err)
	before, ok := StatsOf(fsys)
	require.True(t, ok)
	const n = 300
	for i := range n {
		require.NoError(t, db.Set(key(i), value(i, 1), pebble.Sync))
	}
	s, _ := StatsOf(fsys)
	d := s.Sub(before)
	// One fdatasync of the WAL per commit at least (Pebble may add the
	// MANIFEST's), and the values written once at least.
	assert.GreaterOrEqual(t, d.Write.Syncs, uint64(n))
	assert.GreaterOrEqual(t, d.Write.Bytes, uint64(n*1024))
	assert.GreaterOrEqual(t, d.Write.DeviceBytes, d.Write.Bytes) // padded tails
	assert.Equal(t, d.Write.Syncs, d.Write.SyncLatency.Count())
	require.NoError(t, db.Flush())
	checkGen(t, db, n, 1, 0)
	require.NoError(t, db.Close())
	s, _ = StatsOf(fsys)
	t.Logf("writes %d (%d bytes, %d on the device), syncs %d (p50 %v, p99 %v); reads %+v, fresh %d",
		s.Write.Writes, s.Write.Bytes, s.Write.DeviceBytes, s.Write.Syncs,
		s.Write.SyncLatency.Quantile(0.5), s.Write.SyncLatency.Quantile(0.99), s.Read, s.FreshReads)
	close(reports)
	for r := range reports {
		t.Errorf("reported below the threshold: %s", r)
	}
}

// TestSlowSyncDiskHealth plants a slow fdatasync through Options.Faults
// under a file of an FS wrapped in vfs.WithDiskHealthChecks: both
// Options.Slow and the disk-health callback report it while the Sync is
// in flight, naming the file; Options.Slow once. Pebble's checks look
// every 2 s, so the fdatasync takes 3 s.
func TestSlowSyncDiskHealth(t *testing.T) {
	dir := testenv.Dir(t)
	name := filepath.Join(dir, "000002.log")
	slow := make(chan fileio.SlowIO, 8)
	health := make(chan vfs.DiskSlowInfo, 8)
	inner := New(&Options{Faults: faults.NewPlan(faults.Late(direct.OpSync, 1, 3*time.Second)),
		Slow: &fileio.SlowPolicy{Threshold: time.Second, Report: func(s fileio.SlowIO) { slow <- s }}})
	fsys, closer := vfs.WithDiskHealthChecks(inner, 100*time.Millisecond, nil, func(i vfs.DiskSlowInfo) {
		select {
		case health <- i:
		default: // it reports again at every check while the Sync lasts
		}
	})
	defer closer.Close()
	f, err := fsys.Create(name, vfs.WriteCategoryUnspecified)
	require.NoError(t, err)
	_, err = f.Write(pattern(2, 1000))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- f.Sync() }()
	var gotSlow, gotHealth bool
	for !gotSlow || !gotHealth {
		select {
		case s := <-slow:
			require.False(t, gotSlow, "Options.Slow reported twice: %v", s)
			gotSlow = true
			assert.Equal(t, direct.OpSync, s.Op)
			assert.Equal(t, name, s.Name)
			t.Logf("Options.Slow: %v", s)
		case h := <-health:
			gotHealth = true
			assert.Equal(t, name, h.Path)
			assert.Contains(t, []vfs.OpType{vfs.OpTypeSync, vfs.OpTypeSyncData}, h.OpType)
			t.Logf("disk health: %v", h)
		case err := <-done:
			t.Fatalf("Sync returned (%v) before both reports (Options.Slow %v, disk health %v)", err, gotSlow, gotHealth)
		}
	}
	require.NoError(t, <-done)
	require.NoError(t, f.Close())
	assert.Empty(t, slow, "Options.Slow reported twice")
	s, _ := StatsOf(fsys)
	assert.Equal(t, uint64(2), s.Write.SyncLatency.Count()) // the slow one and Close's
	assert.GreaterOrEqual(t, s.Write.SyncLatency.Quantile(1), 3*time.Second*7/8)
}
