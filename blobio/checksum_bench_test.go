package blobio_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/testenv"
)

// checksumBenchBytes is what one iteration of BenchmarkChecksum writes or
// scans: a quarter of bench_ingest's 128 MiB.
const checksumBenchBytes = 32 << 20

// BenchmarkChecksum sets Options.Checksum off against on, for the ingest
// (appending values into a new blob file, closed and synced, as
// dio-check bench's seq writes it) and for a scan of the file, per value
// size and engine: the cost of sealing and checking every blob. Run its
// rows side by side, several times (-count), and compare medians.
func BenchmarkChecksum(b *testing.B) {
	for _, op := range []string{"ingest", "scan"} {
		for _, value := range []int{100, 8 << 10} {
			for _, e := range testenv.Engines() {
				for _, sum := range []bool{false, true} {
					name := fmt.Sprintf("op=%s/value=%s/engine=%s/checksum=%s", op, testenv.SizeName(value), e.Name, onOff(sum))
					b.Run(name, func(b *testing.B) { benchChecksum(b, op, value, e.Policy, sum) })
				}
			}
		}
	}
}

func onOff(v bool) string {
	if v {
		return "on"
	}
	return "off"
}

func benchChecksum(b *testing.B, op string, value int, p fallback.Policy, sum bool) {
	if p == fallback.Direct {
		if err := fallback.URingErrorAt(testenv.Dir(b)); err != nil {
			b.Skipf("io_uring unavailable: %v", err)
		}
	}
	dir := testenv.Dir(b)
	v := content(1, value)
	n := checksumBenchBytes / value
	o := &blobio.Options{IO: p, Checksum: sum}
	ingest := func(path string) {
		w, err := blobio.Create(path, o)
		if errors.Is(err, direct.ErrNotSupported) {
			b.Skip(err)
		}
		if err != nil {
			b.Fatal(err)
		}
		for range n {
			if _, err := w.WriteBlob(v); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(n * value))
	b.ReportAllocs()
	if op == "ingest" {
		for i := 0; b.Loop(); i++ {
			path := filepath.Join(dir, fmt.Sprint("ingest", i))
			ingest(path)
			b.StopTimer()
			os.Remove(path)
			b.StartTimer()
		}
		return
	}
	path := filepath.Join(dir, "scan")
	ingest(path)
	r, err := blobio.Open(path, o)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	for b.Loop() {
		s := blobio.NewScanner(r)
		k := 0
		for s.Scan() {
			k++
		}
		if err := s.Err(); err != nil || k != n {
			b.Fatalf("scanned %d blobs of %d: %v", k, n, err)
		}
	}
}
