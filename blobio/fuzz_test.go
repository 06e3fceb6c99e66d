package blobio_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/internal/testenv"
)

// FuzzReader feeds arbitrary file contents to ReadBlob and the Scanner:
// errors are fine, panics and hangs are not, and what the Scanner returns
// must agree with ReadBlob at the same offset. Seeds live in
// testdata/fuzz/FuzzReader.
func FuzzReader(f *testing.F) {
	if data, err := os.ReadFile("testdata/golden-zstd.blob"); err == nil {
		f.Add(data)
	}
	f.Add([]byte{0, 1, 'a', 0x80, 0, 0, 0x81})
	f.Add([]byte{0x90, 0, 0, 4, 0x28, 0xb5, 0x2f, 0xfd})
	dir := testenv.Dir(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "fuzz.blob")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := blobio.Open(path, &blobio.Options{BufferSize: 4096})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for off := int64(0); off < min(int64(len(data)), 8); off++ {
			_, _ = r.ReadBlob(off, nil)
		}
		s := blobio.NewScanner(r)
		for n := 0; s.Scan(); n++ {
			if n > len(data) {
				t.Fatal("more blobs than bytes")
			}
			got, err := r.ReadBlob(s.Offset(), nil)
			if err != nil || string(got) != string(s.Bytes()) {
				t.Fatalf("blob at %d: Scanner and ReadBlob disagree (%v)", s.Offset(), err)
			}
		}
	})
}
