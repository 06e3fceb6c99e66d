package direct_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/testenv"
)

// benchRegion is the preallocated span sequential writes cycle through, as
// fio's default --fallocate=native prepares its file: writes inside the
// file's size are not extending writes, which ext4 and xfs serialise.
const benchRegion = 256 << 20

// BenchmarkQueue writes sequentially through a queue with qd requests in
// flight. Compare with
//
//	fio --name=w --directory=$DIO_TEST_DIR --ioengine=io_uring --direct=1 \
//	    --rw=write --bs=64k --iodepth=4 --size=256M
func BenchmarkQueue(b *testing.B) {
	kinds := []direct.EngineKind{direct.EnginePwrite, direct.EngineURing}
	for _, kind := range kinds {
		for _, qd := range []int{1, 2, 4, 8} {
			for _, bs := range []int{8 << 10, 64 << 10, 256 << 10, 1 << 20} {
				name := fmt.Sprintf("engine=%v/qd=%d/bs=%s", kind, qd, testenv.SizeName(bs))
				b.Run(name, func(b *testing.B) { benchQueue(b, kind, qd, bs) })
			}
		}
	}
}

func benchQueue(b *testing.B, kind direct.EngineKind, qd, bs int) {
	if kind == direct.EngineURing {
		if err := fallback.URingErrorAt(testenv.Dir(b)); err != nil {
			b.Skipf("io_uring unavailable: %v", err)
		}
	}
	f, err := direct.Open(filepath.Join(testenv.Dir(b), "bench"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if errors.Is(err, direct.ErrNotSupported) {
		b.Skip(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	err = f.Allocate(0, benchRegion)
	if errors.Is(err, errors.ErrUnsupported) {
		err = f.Truncate(benchRegion)
	}
	if err != nil {
		b.Fatal(err)
	}
	q, err := f.NewQueue(&direct.QueueOptions{Depth: qd, Engine: kind})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()

	bufs := make([][]byte, qd)
	for i := range bufs {
		buf, err := aligned.New(bs, f.Alignment().Memory)
		if err != nil {
			b.Fatal(err)
		}
		defer buf.Free()
		for j := range buf.Bytes() {
			buf.Bytes()[j] = byte(j)
		}
		bufs[i] = buf.Bytes()
	}
	done := make(chan direct.Completion, qd)
	free := make([]uint64, 0, qd)
	for i := range qd {
		free = append(free, uint64(i))
	}
	b.SetBytes(int64(bs))
	b.ReportAllocs()
	b.ResetTimer()
	var off int64
	for range b.N {
		if len(free) == 0 {
			c := q.Await(done)
			if c.Err != nil {
				b.Fatal(c.Err)
			}
			free = append(free, c.Token)
		}
		tok := free[len(free)-1]
		free = free[:len(free)-1]
		if err := q.Submit(direct.Request{Op: direct.OpWrite, Buf: bufs[tok], Off: off, Token: tok, Done: done}); err != nil {
			b.Fatal(err)
		}
		if off += int64(bs); off+int64(bs) > benchRegion {
			off = 0
		}
	}
	for len(free) < qd {
		c := q.Await(done)
		if c.Err != nil {
			b.Fatal(c.Err)
		}
		free = append(free, c.Token)
	}
}

// readFileSize is the span BenchmarkQueueRead reads from: written with
// data first, since a preallocated extent reads back as zeros without
// touching the device.
const readFileSize = 128 << 20

// BenchmarkQueueRead reads random 4 KiB blocks with O_DIRECT from a
// 128 MiB file, each of N goroutines submitting one read and awaiting it
// on one shared queue of depth N, and reports reads/s. Compare with fio
// at the same queue depth on the same directory:
//
//	fio --name=r --filename=$DIO_TEST_DIR/f --size=128M --rw=randread --bs=4k \
//	    --direct=1 --ioengine=io_uring --iodepth=16 --runtime=5 --time_based
func BenchmarkQueueRead(b *testing.B) {
	f, err := direct.Open(filepath.Join(testenv.Dir(b), "read"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if errors.Is(err, direct.ErrNotSupported) {
		b.Skip(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	fill(b, f, readFileSize)
	for _, readers := range []int{1, 4, 16, 64} {
		for _, kind := range []direct.EngineKind{direct.EnginePwrite, direct.EngineURing} {
			b.Run(fmt.Sprintf("readers=%d/engine=%v", readers, kind), func(b *testing.B) {
				if kind == direct.EngineURing {
					if err := fallback.URingErrorAt(f.Name()); err != nil {
						b.Skipf("io_uring unavailable: %v", err)
					}
				}
				benchQueueRead(b, f, kind, readers)
			})
		}
	}
}

// fill writes size bytes of data to f in 1 MiB writes.
func fill(b *testing.B, f *direct.File, size int) {
	buf, err := aligned.New(1<<20, f.Alignment().Memory)
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Free()
	for i := range buf.Bytes() {
		buf.Bytes()[i] = byte(i*7 + 1)
	}
	for off := 0; off < size; off += len(buf.Bytes()) {
		if _, err := f.WriteAt(buf.Bytes(), int64(off)); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
}

func benchQueueRead(b *testing.B, f *direct.File, kind direct.EngineKind, readers int) {
	const bs = 4 << 10
	q, err := f.NewQueue(&direct.QueueOptions{Depth: readers, Engine: kind})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for g := range readers {
		buf, err := aligned.New(bs, f.Alignment().Memory)
		if err != nil {
			b.Fatal(err)
		}
		defer buf.Free()
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			done := make(chan direct.Completion, 1)
			for left.Add(-1) >= 0 {
				off := rng.Int64N(readFileSize/bs) * bs
				if err := q.Submit(direct.Request{Op: direct.OpRead, Buf: buf.Bytes(), Off: off, Done: done}); err != nil {
					b.Error(err)
					return
				}
				if c := q.Await(done); c.Err != nil || c.N != bs {
					b.Error(c.Err, c.N)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "reads/s")
}
