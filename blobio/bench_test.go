package blobio_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/testenv"
)

// BenchmarkWriter appends value-sized blobs. b.N blobs go into files of at
// most 64 MiB, each closed (so synced and truncated) before the next.
func BenchmarkWriter(b *testing.B) {
	for _, value := range []int{100, 8 << 10} {
		for _, buffer := range []int{8 << 10, 64 << 10, 256 << 10} {
			for _, e := range testenv.Engines {
				name := fmt.Sprintf("value=%s/buffer=%s/engine=%s", testenv.SizeName(value), testenv.SizeName(buffer), e.Name)
				b.Run(name, func(b *testing.B) { benchWriter(b, value, buffer, e.Policy) })
			}
		}
	}
}

func benchWriter(b *testing.B, value, buffer int, p fallback.Policy) {
	if p == fallback.Direct {
		if err := direct.URingErrorAt(testenv.Dir(b)); err != nil {
			b.Skipf("io_uring unavailable: %v", err)
		}
	}
	dir := testenv.Dir(b)
	v := content(1, value)
	perFile := max(1, (64<<20)/(value+4))
	b.SetBytes(int64(value))
	b.ReportAllocs()
	var w *blobio.Writer
	var err error
	for i := range b.N {
		if i%perFile == 0 {
			if w != nil {
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
			w, err = blobio.Create(filepath.Join(dir, fmt.Sprint(i)), &blobio.Options{BufferSize: buffer, IO: p})
			if errors.Is(err, direct.ErrNotSupported) {
				b.Skip(err)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		if _, err := w.WriteBlob(v); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}
