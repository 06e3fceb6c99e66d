package blobio_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/testenv"
)

// logRecord is the size of a record in the log benchmarks: issue 16's
// Sync-every-100 workload.
const logRecord = 150

// BenchmarkSyncEvery appends 150-byte records with a Sync every n, as a
// log that acknowledges in batches does: through each engine, and
// through a plain os.File (one write(2) per record, fdatasync every n)
// for comparison. An op is one record.
func BenchmarkSyncEvery(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("n=%d/engine=os.File", n), func(b *testing.B) { benchSyncEveryFile(b, n) })
		for _, e := range testenv.Engines {
			b.Run(fmt.Sprintf("n=%d/engine=%s", n, e.Name), func(b *testing.B) { benchSyncEvery(b, n, e.Policy) })
		}
	}
}

func benchSyncEvery(b *testing.B, n int, p fallback.Policy) {
	if p == fallback.Direct {
		if err := direct.URingErrorAt(testenv.Dir(b)); err != nil {
			b.Skipf("io_uring unavailable: %v", err)
		}
	}
	w, err := blobio.Create(filepath.Join(testenv.Dir(b), "log"), &blobio.Options{IO: p})
	if errors.Is(err, direct.ErrNotSupported) {
		b.Skip(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	v := record(1, logRecord)
	b.SetBytes(logRecord)
	b.ResetTimer()
	for i := range b.N {
		if _, err := w.WriteBlob(v); err != nil {
			b.Fatal(err)
		}
		if (i+1)%n == 0 {
			if err := w.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

func benchSyncEveryFile(b *testing.B, n int) {
	f, err := os.Create(filepath.Join(testenv.Dir(b), "log"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	rec, err := blobio.AppendHeader(nil, logRecord, blobio.None)
	if err != nil {
		b.Fatal(err)
	}
	rec = append(rec, record(1, logRecord)...)
	b.SetBytes(logRecord)
	b.ResetTimer()
	for i := range b.N {
		if _, err := f.Write(rec); err != nil {
			b.Fatal(err)
		}
		if (i+1)%n == 0 {
			if err := unix.Fdatasync(int(f.Fd())); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		b.Fatal(err)
	}
}
