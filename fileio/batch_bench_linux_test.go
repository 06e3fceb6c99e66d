package fileio_test

import (
	"io"
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/dio-storage/dio/fileio"
	"github.com/dio-storage/dio/internal/testenv"
)

// BenchmarkReadBatched measures the reads that go to the queue as a
// batch: reader=ReadAt is a 2 MiB ReadAt at a random offset of a 64 MiB
// file (16 pieces of 128 KiB, the first 8 together), reader=Sequential a
// Sequential reading 2 MiB from a random offset (its opening windows, 64
// KiB doubling to 512 KiB, together). cpu-µs/op is the whole process's
// CPU (getrusage: io_uring's workers included) per operation.
func BenchmarkReadBatched(b *testing.B) {
	const size, span = 64 << 20, 2 << 20
	path := filepath.Join(testenv.Dir(b), "batched")
	w, err := fileio.Create(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := w.Write(content(3, size)); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	r, err := fileio.Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	buf := make([]byte, span)
	rnd := rand.New(rand.NewPCG(1, 2))
	offset := func() int64 { return rnd.Int64N(size-span) &^ 511 }
	run := func(b *testing.B, op func(off int64)) {
		b.SetBytes(span)
		cpu := processCPU()
		for b.Loop() {
			op(offset())
		}
		b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
	}
	b.Run("reader=ReadAt", func(b *testing.B) {
		run(b, func(off int64) {
			if _, err := r.ReadAt(buf, off); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("reader=Sequential", func(b *testing.B) {
		run(b, func(off int64) {
			s, err := r.NewSequential(off)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(s, buf); err != nil {
				b.Fatal(err)
			}
			s.Close()
		})
	})
}

// processCPU returns the CPU time the process has used, user and system,
// every thread, or 0 if unknown.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
