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

// BenchmarkScanner scans a 32 MiB file of 100-byte blobs per iteration.
func BenchmarkScanner(b *testing.B) {
	for _, e := range testenv.Engines {
		b.Run("engine="+e.Name, func(b *testing.B) {
			if e.Policy == fallback.Direct {
				if err := direct.URingErrorAt(testenv.Dir(b)); err != nil {
					b.Skipf("io_uring unavailable: %v", err)
				}
			}
			path := filepath.Join(testenv.Dir(b), "scan")
			w, err := blobio.Create(path, &blobio.Options{IO: e.Policy})
			if errors.Is(err, direct.ErrNotSupported) {
				b.Skip(err)
			}
			if err != nil {
				b.Fatal(err)
			}
			v := content(2, 100)
			for range (32 << 20) / 101 {
				if _, err := w.WriteBlob(v); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			r, err := blobio.Open(path, &blobio.Options{IO: e.Policy})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			b.SetBytes(r.Size())
			b.ReportAllocs()
			for range b.N {
				s := blobio.NewScanner(r)
				n := 0
				for s.Scan() {
					n++
				}
				if err := s.Err(); err != nil || n != (32<<20)/101 {
					b.Fatalf("scanned %d blobs: %v", n, err)
				}
			}
		})
	}
}
