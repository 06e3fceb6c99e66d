package ephemeral_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/ephemeral"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/testenv"
)

// BenchmarkEphemeral appends value-sized blobs to an ephemeral file, alone
// and with a concurrent reader re-reading recent blobs.
func BenchmarkEphemeral(b *testing.B) {
	for _, reader := range []bool{false, true} {
		for _, value := range []int{100, 8 << 10} {
			for _, buffer := range []int{8 << 10, 64 << 10} {
				for _, e := range testenv.Engines() {
					name := fmt.Sprintf("value=%s/buffer=%s/engine=%s", testenv.SizeName(value), testenv.SizeName(buffer), e.Name)
					if reader {
						name = "reader/" + name
					}
					b.Run(name, func(b *testing.B) { benchEphemeral(b, value, buffer, e.Policy, reader) })
				}
			}
		}
	}
}

func benchEphemeral(b *testing.B, value, buffer int, p fallback.Policy, reader bool) {
	if p == fallback.Direct {
		if err := fallback.URingErrorAt(testenv.Dir(b)); err != nil {
			b.Skipf("io_uring unavailable: %v", err)
		}
	}
	dir := testenv.Dir(b)
	v := make([]byte, value)
	perFile := max(1, (256<<20)/(value+4)) // bounded disk use
	b.SetBytes(int64(value))
	b.ReportAllocs()
	var f *ephemeral.File
	var stop chan struct{}
	var wg sync.WaitGroup
	closeFile := func() {
		if f == nil {
			return
		}
		if stop != nil {
			close(stop)
			wg.Wait()
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
	for i := range b.N {
		if i%perFile == 0 {
			closeFile()
			var err error
			f, err = ephemeral.Create(dir, &ephemeral.Options{BufferSize: buffer, IO: p})
			if errors.Is(err, direct.ErrNotSupported) {
				b.Skip(err)
			}
			if err != nil {
				b.Fatal(err)
			}
			if reader {
				stop = make(chan struct{})
				wg.Go(func() { readRecent(f, value, stop) })
			}
		}
		if _, err := f.WriteBlob(v); err != nil {
			b.Fatal(err)
		}
	}
	closeFile()
}

// readRecent re-reads the value just behind the writer's tail until stop.
func readRecent(f *ephemeral.File, value int, stop <-chan struct{}) {
	buf := make([]byte, value)
	for {
		select {
		case <-stop:
			return
		default:
		}
		if size := f.Size(); size > int64(4*value) {
			f.ReadAt(buf, size-int64(4*value))
		}
	}
}

// BenchmarkWriterBesideReaders measures the writer's append pace alone and
// beside readers doing random ReadBlob of blobs it acknowledged, most of
// them on disk: writer-MiB/s is the writer's pace, reads/s the readers'
// total. The writer should keep its pace whatever the readers do (no
// device wait of theirs in its way), and the readers' reads should scale
// with their number (each waits for the device on its own).
func BenchmarkWriterBesideReaders(b *testing.B) {
	for _, readers := range []int{0, 1, 16} {
		for _, e := range testenv.Engines() {
			b.Run(fmt.Sprintf("readers=%d/engine=%s", readers, e.Name), func(b *testing.B) {
				benchWriterBesideReaders(b, readers, e.Policy)
			})
		}
	}
}

func benchWriterBesideReaders(b *testing.B, readers int, p fallback.Policy) {
	if p == fallback.Direct {
		if err := fallback.URingErrorAt(testenv.Dir(b)); err != nil {
			b.Skipf("io_uring unavailable: %v", err)
		}
	}
	b.StopTimer() // timed: the writer's appends, once the readers run
	const (
		value   = 4000     // issue 13's random blobs
		prefill = 32 << 20 // on disk before the writer is timed
		perFile = 256 << 20
	)
	dir := testenv.Dir(b)
	v := make([]byte, value)
	for i := range v {
		v[i] = byte(i)
	}
	var (
		elapsed time.Duration
		written int64
		reads   atomic.Int64
		counted int64
	)
	b.SetBytes(value)
	for i := 0; i < b.N; {
		// A file: prefilled, then read at random while the writer is
		// timed, up to perFile bytes.
		f, err := ephemeral.Create(dir, &ephemeral.Options{IO: p})
		if errors.Is(err, direct.ErrNotSupported) {
			b.Skip(err)
		}
		if err != nil {
			b.Fatal(err)
		}
		offs := make([]int64, perFile/value+1)
		var acked atomic.Int64 // offs[:acked] are acknowledged
		write := func() {
			off, err := f.WriteBlob(v)
			if err != nil {
				b.Fatal(err)
			}
			offs[acked.Load()] = off
			acked.Add(1)
		}
		for f.Size() < prefill {
			write()
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for g := range readers {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(g), 1))
				var buf []byte
				for {
					select {
					case <-stop:
						return
					default:
					}
					var err error
					if buf, err = f.ReadBlob(offs[r.Int64N(acked.Load())], buf); err != nil || len(buf) != value {
						b.Errorf("ReadBlob: %d bytes, %v", len(buf), err)
						return
					}
					reads.Add(1)
				}
			})
		}
		time.Sleep(10 * time.Millisecond) // the readers at work
		before := reads.Load()
		start := time.Now()
		b.StartTimer()
		for ; i < b.N && f.Size() < perFile; i++ {
			write()
			written += value
		}
		b.StopTimer()
		elapsed += time.Since(start)
		counted += reads.Load() - before
		close(stop)
		wg.Wait()
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(written)/(1<<20)/elapsed.Seconds(), "writer-MiB/s")
	b.ReportMetric(float64(counted)/elapsed.Seconds(), "reads/s")
}
