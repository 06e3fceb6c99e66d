package ephemeral_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

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
				for _, e := range testenv.Engines {
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
		if err := direct.URingErrorAt(testenv.Dir(b)); err != nil {
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
