//go:build linux

package pebblefs

import (
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/dio-storage/dio/internal/testenv"
	"golang.org/x/sys/unix"
)

// BenchmarkBlockCacheMiss is the I/O of a block-cache miss: one
// goroutine reading 4 KiB blocks (with Pebble's 5-byte trailer, at
// offsets that are not aligned) at random from a 512 MiB file, through
// pebblefs (O_DIRECT, no fresh files) and through vfs.Default with a
// cold page cache (dropped with FADV_DONTNEED before the run, and the
// file opened with vfs.RandomReadsOption as Pebble opens sstables, so
// the kernel reads no more than the pages asked for). It reports the
// process's CPU per read (user and system, rusage) beside the time:
//
//	go test -run '^$' -bench BlockCacheMiss -benchtime 20000x .
func BenchmarkBlockCacheMiss(b *testing.B) {
	const size = 512 << 20
	name := filepath.Join(testenv.Dir(b), "miss.sst")
	writeSized(b, name, size)
	p := make([]byte, 4096+5)
	benchCold(b, name, 2, func(f vfs.File, r *rand.Rand) error {
		off := int64(r.IntN(size/4096-1))*4096 + int64(r.IntN(64))*13
		_, err := f.ReadAt(p, off)
		return err
	})
}

// BenchmarkIteratorPrefetch is an iterator's scan of a level as Pebble
// makes it on a file it has started reading in order: Prefetch of 64
// KiB at a random place in a 512 MiB file, then the 4 KiB blocks (with
// their 5-byte trailers) inside it, in order. On pebblefs the blocks come
// from the prefetch's memory; on vfs.Default (cold page cache, FADV_DONTNEED
// before the run) Prefetch is the kernel's read-ahead. One op is one
// Prefetch and its 15 blocks; CPU per op is the process's (rusage):
//
//	go test -run '^$' -bench IteratorPrefetch -benchmem -benchtime 5000x .
func BenchmarkIteratorPrefetch(b *testing.B) {
	const size, window = 512 << 20, 64 << 10
	name := filepath.Join(testenv.Dir(b), "scan.sst")
	writeSized(b, name, size)
	p := make([]byte, 4096+5)
	benchCold(b, name, 4, func(f vfs.File, r *rand.Rand) error {
		off := int64(r.IntN(size/window-1))*window + int64(r.IntN(64))*13
		// vfs.Default's Prefetch returns readahead(2)'s errno, "errno 0"
		// when it succeeds; Pebble ignores it too.
		_ = f.Prefetch(off, window)
		for o := off; o+int64(len(p)) <= off+window; o += int64(len(p)) {
			if _, err := f.ReadAt(p, o); err != nil {
				return err
			}
		}
		return nil
	})
}

// benchCold runs op once an iteration on name opened as Pebble opens
// an sstable (vfs.RandomReadsOption), through vfs.Default from a cold
// page cache (FADV_DONTNEED first) and through pebblefs with every read
// from the device (no fresh files), with a random source seeded by
// seed, and reports the process's CPU per op (user and system, rusage).
func benchCold(b *testing.B, name string, seed uint64, op func(f vfs.File, r *rand.Rand) error) {
	for _, c := range []struct {
		name string
		fs   vfs.FS
	}{
		{"fs=default", vfs.Default},
		{"fs=pebblefs", New(&Options{FreshFiles: -1})},
	} {
		b.Run(c.name, func(b *testing.B) {
			f, err := c.fs.Open(name, vfs.RandomReadsOption)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			if fd := f.Fd(); fd != vfs.InvalidFd {
				_ = unix.Fadvise(int(fd), 0, 0, unix.FADV_DONTNEED)
			}
			r := rand.New(rand.NewPCG(seed, seed+1))
			cpu0 := cpuNow()
			b.ResetTimer()
			for b.Loop() {
				if err := op(f, r); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuNow()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCompactionRead reads a 64 MiB file from front to back in
// Pebble's compaction pattern, 4 KiB blocks and their trailers with
// ReadAt at increasing offsets, through a handle opened with
// vfs.SequentialReadsOption: on pebblefs with its read-ahead (512 KiB
// by default, 2 MiB, and the 64 KiB floor of a spent budget) and
// without it (a handle without the option: block by block, Pebble's own
// pattern), and on vfs.Default from a cold page cache (FADV_SEQUENTIAL
// read-ahead). MB/s and CPU per MiB:
//
//	go test -run '^$' -bench CompactionRead -benchtime 5x .
func BenchmarkCompactionRead(b *testing.B) {
	dir := testenv.Dir(b)
	const size = 64 << 20
	name := filepath.Join(dir, "compaction.sst")
	writeSized(b, name, size)
	for _, c := range []struct {
		name string
		fs   vfs.FS
		opt  vfs.OpenOption
	}{
		{"fs=default", vfs.Default, vfs.SequentialReadsOption},
		{"fs=pebblefs/readahead=512KiB", New(&Options{FreshFiles: -1}), vfs.SequentialReadsOption},
		{"fs=pebblefs/readahead=2MiB", New(&Options{FreshFiles: -1, ReadAhead: 2 << 20}), vfs.SequentialReadsOption},
		{"fs=pebblefs/readahead=64KiB", New(&Options{FreshFiles: -1, Memory: 3}), vfs.SequentialReadsOption},
		{"fs=pebblefs/block-by-block", New(&Options{FreshFiles: -1}), vfs.RandomReadsOption},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := make([]byte, 4096+5)
			b.SetBytes(size)
			var cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				f, err := c.fs.Open(name, c.opt)
				if err != nil {
					b.Fatal(err)
				}
				if fd := f.Fd(); fd != vfs.InvalidFd {
					_ = unix.Fadvise(int(fd), 0, 0, unix.FADV_DONTNEED)
				}
				cpu0 := cpuNow()
				b.StartTimer()
				for off := int64(0); off+int64(len(p)) <= size; off += int64(len(p)) {
					if _, err := f.ReadAt(p, off); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				cpu += cpuNow() - cpu0
				f.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N)/(size>>20), "cpu-µs/MiB")
		})
	}
}

// writeSized writes a file of size bytes (a multiple of 1 MiB) through
// pebblefs, which leaves none of it in the page cache.
func writeSized(b *testing.B, name string, size int) {
	data := pattern(1, 1<<20)
	w, err := New(&Options{FreshFiles: -1}).Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		b.Fatal(err)
	}
	for off := 0; off < size; off += len(data) {
		if _, err := w.Write(data); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}
