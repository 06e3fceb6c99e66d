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

// BenchmarkScannerShort scans files of a few read windows (512 KiB each)
// of 100-byte blobs, start to end, as a service scans a small layer or
// segment: the first two windows' reads go out together, so there the
// second is read while the first is parsed, where BenchmarkScanner's
// 32 MiB scans are dominated by the reads that follow. cpu-µs/op is the
// whole process's CPU per scan (getrusage: io_uring's workers included).
func BenchmarkScannerShort(b *testing.B) {
	for _, size := range []int{1 << 20, 4 << 20} {
		for _, value := range []int{100, 16 << 10} {
			for _, e := range testenv.Engines() {
				b.Run(fmt.Sprintf("size=%s/value=%s/engine=%s", testenv.SizeName(size), testenv.SizeName(value), e.Name), func(b *testing.B) {
					if e.Policy == fallback.Direct {
						if err := fallback.URingErrorAt(testenv.Dir(b)); err != nil {
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
					v := content(2, value)
					blobs := size / (value + blobio.HeaderSize(value, blobio.None))
					for range blobs {
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
					cpu := processCPU()
					for b.Loop() {
						s := blobio.NewScanner(r)
						n := 0
						for s.Scan() {
							n++
						}
						if err := s.Err(); err != nil || n != blobs {
							b.Fatalf("scanned %d blobs: %v", n, err)
						}
					}
					b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
				})
			}
		}
	}
}
