package direct_test

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/faults"
	"github.com/dio-storage/dio/internal/testenv"
)

// statsFile is a file of one kind for the statistics tests, and the path
// its own calls count under.
type statsFile struct {
	name string
	path direct.Path
	open func(t *testing.T, name string) *direct.File
}

// statsFiles are the kinds: O_DIRECT (skipped where the filesystem
// refuses it) and the page cache.
var statsFiles = []statsFile{
	{"direct", direct.PathPwrite, func(t *testing.T, name string) *direct.File {
		return openOrSkip(t, name, os.O_RDWR|os.O_CREATE)
	}},
	{"buffered", direct.PathStdFS, func(t *testing.T, name string) *direct.File {
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
		require.NoError(t, err)
		return direct.Buffered(f)
	}},
}

// unitOf is the block the tests write in: the file's, at least a sector.
func unitOf(f *direct.File) int { return max(f.Alignment().Block(), direct.MinAlignment) }

// blocks returns n aligned units of memory for f, filled with seed.
func blocks(t *testing.T, f *direct.File, n int, seed byte) []byte {
	t.Helper()
	b, err := aligned.New(n*unitOf(f), max(f.Alignment().Memory, direct.MinAlignment))
	require.NoError(t, err)
	t.Cleanup(b.Free)
	for i := range b.Bytes() {
		b.Bytes()[i] = seed + byte(i)
	}
	return b.Bytes()
}

// want is what a test expects of one operation's counts.
type want struct{ ops, errors, retries, bytes uint64 }

func checkOp(t *testing.T, what string, got direct.OpStats, w want) {
	t.Helper()
	assert.Equal(t, w, want{got.Ops, got.Errors, got.Retries, got.Bytes}, "%s: ops, errors, retries, bytes", what)
	assert.Equal(t, got.Ops, got.Latency.Count(), "%s: one latency per operation", what)
}

func checkCounts(t *testing.T, what string, got direct.Counts, w want) {
	t.Helper()
	assert.Equal(t, w, want{got.Ops, got.Errors, got.Retries, got.Bytes}, "%s (meter): ops, errors, retries, bytes", what)
}

// TestStatsCounts runs a known workload (writes of known sizes, syncs,
// reads at known offsets, one cut short by the end of the file, a
// truncate) on each kind of file and checks the process-wide counts, by
// path and in total, and the Meter's, against what it computes.
func TestStatsCounts(t *testing.T) {
	for _, k := range statsFiles {
		t.Run(k.name, func(t *testing.T) {
			name := filepath.Join(testenv.Dir(t), "f")
			m, err := direct.NewMeter(&direct.MeterOptions{SyncLatency: true})
			require.NoError(t, err)
			f := k.open(t, name).WithMeter(m)
			defer f.Close()
			u := unitOf(f)
			buf := blocks(t, f, 4, 1)

			before := direct.Stats()
			var size int
			for i := 1; i <= 4; i++ { // 1, 2, 3 and 4 units
				n, err := f.WriteAt(buf[:i*u], int64(size))
				require.NoError(t, err)
				require.Equal(t, i*u, n)
				size += n
			}
			require.NoError(t, f.Sync())
			require.NoError(t, f.Sync())
			reads := []struct{ off, n, want int }{
				{0, u, u},
				{u, 2 * u, 2 * u},
				{size - u, 2 * u, u}, // cut short by the end of the file: not an error
			}
			var read int
			for _, r := range reads {
				n, err := f.ReadAt(buf[:r.n], int64(r.off))
				if r.want < r.n {
					require.ErrorIs(t, err, io.EOF)
				} else {
					require.NoError(t, err)
				}
				require.Equal(t, r.want, n)
				read += n
			}
			require.NoError(t, f.Truncate(int64(size-100)))
			s := direct.Stats().Sub(before)

			wrote := uint64(size)
			checkOp(t, "write", s.Paths[k.path].Write, want{4, 0, 0, wrote})
			// The read cut short took a second pread, which found the end.
			checkOp(t, "read", s.Paths[k.path].Read, want{3, 0, 1, uint64(read)})
			checkOp(t, "sync", s.Paths[k.path].Sync, want{2, 0, 0, 0})
			checkOp(t, "truncate", s.Paths[k.path].Truncate, want{1, 0, 0, 0})
			checkOp(t, "write, every path", s.Write, want{4, 0, 0, wrote})
			checkOp(t, "read, every path", s.Read, want{3, 0, 1, uint64(read)})
			for _, p := range direct.Paths() {
				if p != k.path {
					assert.Zero(t, s.Paths[p].Write.Ops+s.Paths[p].Read.Ops+s.Paths[p].Sync.Ops, "path %v", p)
				}
			}

			ms := m.Stats()
			checkCounts(t, "write", ms.Write, want{4, 0, 0, wrote})
			checkCounts(t, "read", ms.Read, want{3, 0, 1, uint64(read)})
			checkCounts(t, "sync", ms.Sync, want{2, 0, 0, 0})
			checkCounts(t, "truncate", ms.Truncate, want{1, 0, 0, 0})
			assert.Equal(t, uint64(2), ms.SyncLatency.Count())

			// A caller's asks, as fileio's Reader reports them: 100 bytes
			// wanted, a whole unit read.
			before = direct.Stats()
			m.Asked(direct.OpRead, 100)
			_, err = f.ReadAt(buf[:u], 0)
			require.NoError(t, err)
			s = direct.Stats().Sub(before)
			assert.Equal(t, uint64(100), s.Paths[k.path].Read.Asked)
			assert.Equal(t, uint64(u), s.Paths[k.path].Read.Bytes)
			ms = m.Stats().Sub(ms)
			assert.Equal(t, direct.Counts{Ops: 1, Bytes: uint64(u), Calls: 1, Asked: 100}, ms.Read)
		})
	}
}

// TestStatsQueuePwrite checks that the pwrite engine's requests are
// counted as a File's own calls are.
func TestStatsQueuePwrite(t *testing.T) {
	for _, k := range statsFiles {
		t.Run(k.name, func(t *testing.T) {
			m, err := direct.NewMeter(nil)
			require.NoError(t, err)
			f := k.open(t, filepath.Join(testenv.Dir(t), "f")).WithMeter(m)
			defer f.Close()
			q, err := f.NewQueue(&direct.QueueOptions{Engine: direct.EnginePwrite, Depth: 4})
			require.NoError(t, err)
			defer q.Close()
			u := unitOf(f)
			buf := blocks(t, f, 8, 2)

			before := direct.Stats()
			for i := range 8 {
				c := do(t, q, direct.Request{Op: direct.OpWrite, Buf: buf[i*u : (i+1)*u], Off: int64(i * u)})
				require.NoError(t, c.Err)
			}
			require.NoError(t, do(t, q, direct.Request{Op: direct.OpSync}).Err)
			c := do(t, q, direct.Request{Op: direct.OpRead, Buf: buf[:4*u], Off: int64(6 * u)})
			require.ErrorIs(t, c.Err, io.EOF)
			s := direct.Stats().Sub(before)
			checkOp(t, "write", s.Paths[k.path].Write, want{8, 0, 0, uint64(8 * u)})
			checkOp(t, "sync", s.Paths[k.path].Sync, want{1, 0, 0, 0})
			checkOp(t, "read", s.Paths[k.path].Read, want{1, 0, 1, uint64(2 * u)})
			checkCounts(t, "write", m.Stats().Write, want{8, 0, 0, uint64(8 * u)})
		})
	}
}

// TestStatsFaults plants failures through the fault seam and checks that
// each is counted once, where it belongs: retries inside an operation,
// a failure with its errno, the sectors of a split read.
func TestStatsFaults(t *testing.T) {
	for _, k := range statsFiles {
		t.Run(k.name, func(t *testing.T) {
			m, err := direct.NewMeter(nil)
			require.NoError(t, err)
			base := k.open(t, filepath.Join(testenv.Dir(t), "f"))
			defer base.Close()
			u := unitOf(base)
			buf := blocks(t, base, 4, 3)
			_, err = base.WriteAt(buf, 0)
			require.NoError(t, err)

			run := func(plan *faults.Plan, io func(f *direct.File)) direct.PathStats {
				t.Helper()
				before := direct.Stats()
				io(base.WithFaults(plan).WithMeter(m))
				return direct.Stats().Sub(before).Paths[k.path]
			}

			// Two EINTRs, then the write: one operation, two retries.
			s := run(faults.NewPlan(faults.Transient(direct.OpWrite, 2, syscall.EINTR)), func(f *direct.File) {
				_, err := f.WriteAt(buf[:u], 0)
				require.NoError(t, err)
			})
			checkOp(t, "write after EINTR", s.Write, want{1, 0, 2, uint64(u)})

			// A short write resumed: one operation, one retry.
			s = run(faults.NewPlan(faults.Short(direct.OpWrite, 1, u)), func(f *direct.File) {
				_, err := f.WriteAt(buf[:2*u], 0)
				require.NoError(t, err)
			})
			checkOp(t, "short write", s.Write, want{1, 0, 1, uint64(2 * u)})

			// ENOSPC: one failure, by its errno.
			s = run(faults.NewPlan(faults.Rule{Op: direct.OpWrite, Times: 1, Fault: direct.Fault{Err: syscall.ENOSPC}}), func(f *direct.File) {
				_, err := f.WriteAt(buf[:u], 0)
				require.ErrorIs(t, err, syscall.ENOSPC)
				_, err = f.WriteAt(buf[:u], 0)
				require.NoError(t, err)
			})
			checkOp(t, "ENOSPC", s.Write, want{2, 1, 0, uint64(u)})
			assert.Equal(t, uint64(1), s.Write.Errnos.Count(syscall.ENOSPC))

			// EIO at fdatasync.
			s = run(faults.NewPlan(faults.Rule{Op: direct.OpSync, Times: 1, Fault: direct.Fault{Err: syscall.EIO}}), func(f *direct.File) {
				require.ErrorIs(t, f.Sync(), syscall.EIO)
			})
			checkOp(t, "sync EIO", s.Sync, want{1, 1, 0, 0})
			assert.Equal(t, uint64(1), s.Sync.Errnos.Count(syscall.EIO))

			// A bad sector: the read of four sectors fails, then each
			// sector is read alone and one of them fails.
			sector := max(base.Alignment().Offset, direct.MinAlignment)
			before := direct.Stats()
			ms := m.Stats()
			s = run(faults.NewPlan(faults.BadSectors(int64(2*sector), int64(sector))), func(f *direct.File) {
				n, err := f.ReadAt(buf[:4*sector], 0)
				var se *direct.SectorError
				require.ErrorAs(t, err, &se)
				require.Equal(t, 2*sector, n)
			})
			checkOp(t, "bad sector", s.Read, want{5, 2, 0, uint64(3 * sector)})
			assert.Equal(t, uint64(2), s.Read.Errnos.Count(syscall.EIO))
			assert.Equal(t, uint64(1), direct.Stats().Sub(before).SectorErrors)
			assert.Equal(t, uint64(1), m.Stats().Sub(ms).SectorErrors)

			// Every fault above, in the meter too.
			w := m.Stats().Write
			assert.Equal(t, direct.Counts{Ops: 4, Errors: 1, Retries: 3, Bytes: uint64(4 * u)}, w)
		})
	}
}

// TestSyncDirCounted checks SyncDir's count and its meter's.
func TestSyncDirCounted(t *testing.T) {
	m, err := direct.NewMeter(nil)
	require.NoError(t, err)
	dir := testenv.Dir(t)
	before := direct.Stats()
	require.NoError(t, direct.SyncDir(dir, m))
	require.NoError(t, direct.SyncDir(dir, nil))
	require.Error(t, direct.SyncDir(filepath.Join(dir, "missing"), m))
	s := direct.Stats().Sub(before)
	checkOp(t, "fsync-dir", s.DirSync, want{2, 0, 0, 0})
	assert.Equal(t, direct.Counts{Ops: 1}, m.Stats().DirSync)
}

// slowFile opens a file of kind k with faults planted and a Meter that
// reports slow operations to the returned channel.
func slowFile(t *testing.T, k statsFile, threshold time.Duration, rules ...faults.Rule) (*direct.File, *direct.Meter, <-chan direct.SlowIO) {
	t.Helper()
	reports := make(chan direct.SlowIO, 64)
	m, err := direct.NewMeter(&direct.MeterOptions{Slow: &direct.SlowPolicy{
		Threshold: threshold,
		Report:    func(s direct.SlowIO) { reports <- s },
	}})
	require.NoError(t, err)
	t.Cleanup(m.Close)
	f := k.open(t, filepath.Join(testenv.Dir(t), "f"))
	t.Cleanup(func() { f.Close() })
	return f.WithFaults(faults.NewPlan(rules...)).WithMeter(m), m, reports
}

// TestSlowReportedInFlight plants a write and a sync delayed past the
// threshold and checks each is reported while still in flight, once,
// naming its file, operation, offset and length.
func TestSlowReportedInFlight(t *testing.T) {
	const threshold, delay = 50 * time.Millisecond, 600 * time.Millisecond
	for _, k := range statsFiles {
		t.Run(k.name, func(t *testing.T) {
			f, m, reports := slowFile(t, k, threshold,
				faults.Late(direct.OpWrite, 1, delay), faults.Late(direct.OpSync, 1, delay))
			u := unitOf(f)
			buf := blocks(t, f, 1, 4)

			for _, op := range []direct.Op{direct.OpWrite, direct.OpSync} {
				var over atomic.Bool
				done := make(chan error, 1)
				go func() {
					var err error
					if op == direct.OpWrite {
						_, err = f.WriteAt(buf, int64(3*u))
					} else {
						err = f.Sync()
					}
					over.Store(true)
					done <- err
				}()
				select {
				case r := <-reports:
					assert.False(t, over.Load(), "%v reported after it was over", op)
					assert.Equal(t, f.Name(), r.Name)
					assert.Equal(t, op, r.Op)
					if op == direct.OpWrite {
						assert.Equal(t, int64(3*u), r.Off)
						assert.Equal(t, u, r.Len)
					}
					assert.GreaterOrEqual(t, r.Elapsed, threshold)
					t.Log(r)
				case <-time.After(30 * time.Second):
					t.Fatalf("%v delayed %v past a threshold of %v: not reported", op, delay, threshold)
				}
				require.NoError(t, <-done)
			}
			time.Sleep(4 * threshold) // the checks go on a while: nothing more
			assert.Empty(t, reports, "reported more than once")
			assert.Equal(t, uint64(2), m.Stats().Slow)
		})
	}
}

// TestSlowConcurrent delays several writes at once: each is reported
// once, by its own offset.
func TestSlowConcurrent(t *testing.T) {
	const n = 6
	f, _, reports := slowFile(t, statsFiles[1], 20*time.Millisecond, faults.Late(direct.OpWrite, n, 300*time.Millisecond))
	u := unitOf(f)
	buf := blocks(t, f, n, 5)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, err := f.WriteAt(buf[i*u:(i+1)*u], int64(i*u))
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	time.Sleep(100 * time.Millisecond)
	offs := map[int64]int{}
	for len(reports) > 0 {
		offs[(<-reports).Off]++
	}
	want := map[int64]int{}
	for i := range n {
		want[int64(i*u)] = 1
	}
	assert.Equal(t, want, offs)
}

// TestSlowBelowThreshold checks that operations that stay under the
// threshold, though checked while in flight, are not reported.
func TestSlowBelowThreshold(t *testing.T) {
	f, m, reports := slowFile(t, statsFiles[1], time.Second,
		faults.Late(direct.OpWrite, 2, 200*time.Millisecond), faults.Late(direct.OpSync, 1, 200*time.Millisecond))
	buf := blocks(t, f, 1, 6)
	for range 3 {
		_, err := f.WriteAt(buf, 0)
		require.NoError(t, err)
	}
	require.NoError(t, f.Sync())
	assert.Empty(t, reports)
	assert.Zero(t, m.Stats().Slow)
}

// TestSlowClosed checks that a closed Meter reports nothing more.
func TestSlowClosed(t *testing.T) {
	f, m, reports := slowFile(t, statsFiles[1], 10*time.Millisecond, faults.Late(direct.OpWrite, 1, 200*time.Millisecond))
	m.Close()
	_, err := f.WriteAt(blocks(t, f, 1, 7), 0)
	require.NoError(t, err)
	assert.Empty(t, reports)
}

func TestSlowPolicyChecked(t *testing.T) {
	for _, p := range []direct.SlowPolicy{{Threshold: 0, Report: func(direct.SlowIO) {}}, {Threshold: time.Second}} {
		_, err := direct.NewMeter(&direct.MeterOptions{Slow: &p})
		assert.ErrorIs(t, err, direct.ErrInvalidSlowPolicy)
	}
}

// TestStatsRace runs reads, writes and syncs on a watched file from
// many goroutines, with a threshold so short that most are reported,
// while others take snapshots, then checks the counts add up: every
// operation counted once, reported at most once.
func TestStatsRace(t *testing.T) {
	var reported atomic.Uint64
	m, err := direct.NewMeter(&direct.MeterOptions{SyncLatency: true, Slow: &direct.SlowPolicy{
		Threshold: time.Microsecond,
		Report:    func(direct.SlowIO) { reported.Add(1) },
	}})
	require.NoError(t, err)
	defer m.Close()
	k := statsFiles[1]
	base := k.open(t, filepath.Join(testenv.Dir(t), "f"))
	defer base.Close()
	f := base.WithFaults(faults.NewPlan(faults.Rule{Fault: direct.Fault{Delay: 50 * time.Microsecond}})).WithMeter(m)
	u := unitOf(f)
	const goroutines = 8
	deadline := time.Now().Add(2 * time.Second)
	var total atomic.Uint64
	stop := make(chan struct{})
	var snaps sync.WaitGroup
	snaps.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = direct.Stats()
			_ = m.Stats()
		}
	})
	before := m.Stats()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			buf := blocks(t, f, 1, byte(g))
			for i := 0; time.Now().Before(deadline); i++ {
				total.Add(1)
				off := int64((g + i) % 64 * u)
				switch i % 3 {
				case 0:
					_, err := f.WriteAt(buf, off)
					assert.NoError(t, err)
				case 1:
					_, err := f.ReadAt(buf, off)
					if !errors.Is(err, io.EOF) {
						assert.NoError(t, err)
					}
				case 2:
					assert.NoError(t, f.Sync())
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	snaps.Wait()
	s := m.Stats().Sub(before)
	ops := s.Read.Ops + s.Write.Ops + s.Sync.Ops
	assert.Equal(t, total.Load(), ops)
	assert.Equal(t, s.Sync.Ops, s.SyncLatency.Count())
	assert.LessOrEqual(t, reported.Load(), ops)
	assert.Equal(t, reported.Load(), s.Slow)
	t.Logf("%d operations, %d reported slow", ops, reported.Load())
}

// TestStatsAllocs checks that counting, with a Meter and a watch,
// allocates nothing per operation.
func TestStatsAllocs(t *testing.T) {
	if testenv.Race {
		t.Skip("the race detector allocates")
	}
	m, err := direct.NewMeter(&direct.MeterOptions{SyncLatency: true, Slow: &direct.SlowPolicy{Threshold: time.Hour, Report: func(direct.SlowIO) {}}})
	require.NoError(t, err)
	defer m.Close()
	for _, k := range statsFiles {
		t.Run(k.name, func(t *testing.T) {
			f := k.open(t, filepath.Join(testenv.Dir(t), "f")).WithMeter(m)
			defer f.Close()
			buf := blocks(t, f, 1, 8)
			allocs := testing.AllocsPerRun(100, func() {
				if _, err := f.WriteAt(buf, 0); err != nil {
					t.Fatal(err)
				}
				if _, err := f.ReadAt(buf, 0); err != nil {
					t.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					t.Fatal(err)
				}
				m.Asked(direct.OpRead, 10)
			})
			assert.Zero(t, allocs)
		})
	}
}

// TestStatsJSON checks the snapshot's JSON, which expvar publishes.
func TestStatsJSON(t *testing.T) {
	b, err := json.Marshal(direct.Stats())
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, json.Unmarshal(b, &v))
	paths, ok := v["Paths"].(map[string]any)
	require.True(t, ok, "%s", b)
	assert.Contains(t, paths, "direct+io_uring")
	assert.Contains(t, paths, "std-fs")
	read, ok := v["Read"].(map[string]any)
	require.True(t, ok)
	assert.Contains(t, read["Latency"], "p99_us")
	assert.Less(t, len(b), 20000, "compact: no buckets")
}
