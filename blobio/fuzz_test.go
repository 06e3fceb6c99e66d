package blobio_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dio-storage/dio/blobio"
	"github.com/dio-storage/dio/internal/testenv"
)

// FuzzReader feeds arbitrary file contents to ReadBlob, ReadBlobs and the
// Scanner: errors are fine, panics and hangs are not, what the Scanner
// returns must agree with ReadBlob at the same offset, and a file that is
// a chain of valid blobs ending exactly at its size (or, unbounded, at a
// 0x00 header) must scan to the end with Err() == nil and as many blobs as
// the chain holds. Seeds live in testdata/fuzz/FuzzReader.
func FuzzReader(f *testing.F) {
	if data, err := os.ReadFile("testdata/golden-zstd.blob"); err == nil {
		f.Add(data)
	}
	f.Add([]byte{0, 1, 'a', 0x80, 0, 0, 0x81})
	f.Add([]byte{0x90, 0, 0, 4, 0x28, 0xb5, 0x2f, 0xfd})
	f.Add([]byte{5, 'h', 'e', 'l', 'l', 'o', 0x80, 0, 0, 0}) // ends in an empty blob
	f.Add([]byte{5, 'h', 'e', 'l', 'l', 'o', 0})             // the same, 1-byte header
	f.Add([]byte{1, 'x', 0, 0, 0, 0, 0, 0})                  // a zero-filled tail
	dir := testenv.Dir(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "fuzz.blob")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, bounded := range []bool{false, true} {
			o := &blobio.Options{BufferSize: 4096}
			if bounded {
				if len(data) == 0 {
					continue
				}
				o.Size = int64(len(data))
			}
			fuzzOne(t, path, data, o)
			fuzzSummed(t, path, data, o.Size)
		}
	})
}

func fuzzOne(t *testing.T, path string, data []byte, o *blobio.Options) {
	r, err := blobio.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var offs []int64
	for off := int64(0); off < min(int64(len(data)), 8); off++ {
		_, _ = r.ReadBlob(off, nil)
		offs = append(offs, off)
	}
	_ = r.ReadBlobs(offs, func(i int, blob []byte) error {
		want, err := r.ReadBlob(offs[i], nil)
		if err != nil || string(want) != string(blob) {
			t.Fatalf("blob at %d: ReadBlobs and ReadBlob disagree (%v)", offs[i], err)
		}
		return nil
	})

	// The chain of blobs from offset 0, by ReadBlob.
	chain, clean := 0, false
	for off := int64(0); ; chain++ {
		if off == int64(len(data)) || (o.Size == 0 && data[off] == 0) {
			clean = true
			break
		}
		if _, err := r.ReadBlob(off, nil); err != nil {
			break
		}
		hs, n, _, _ := blobio.DecodeHeader(data[off:])
		off += int64(hs + n)
	}

	s := blobio.NewScanner(r)
	n := 0
	for ; s.Scan(); n++ {
		if n > len(data) {
			t.Fatal("more blobs than bytes")
		}
		got, err := r.ReadBlob(s.Offset(), nil)
		if err != nil || string(got) != string(s.Bytes()) {
			t.Fatalf("blob at %d: Scanner and ReadBlob disagree (%v)", s.Offset(), err)
		}
	}
	if clean && (s.Err() != nil || n != chain) {
		t.Fatalf("a clean chain of %d blobs (Size %d) scanned as %d: %v", chain, o.Size, n, s.Err())
	}
}
