package blobio

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// BenchmarkSeal is the CPU a seal costs a 100-byte blob, written and
// checked, beside the CRC alone.
func BenchmarkSeal(b *testing.B) {
	data := make([]byte, 100)
	hdr, _ := AppendHeader(nil, len(data)+crcSize, None)
	b.Run("op=seal", func(b *testing.B) {
		var dst []byte
		b.ReportAllocs()
		for b.Loop() {
			dst = appendSeal(dst[:0], hdr, data, None)
		}
	})
	stored := append(append([]byte(nil), data...), appendSeal(nil, hdr, data, None)...)
	b.Run("op=unseal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := unseal(stored, None); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestSealForms: the seal the Writer builds in one buffer and the one
// appendSeal builds in parts agree, and unseal takes both; crcSmall is
// crc32.Update.
func TestSealForms(t *testing.T) {
	for _, c := range []Compression{None, Zstd} {
		for _, n := range []int{0, 1, 100, 200, 5000} {
			data := make([]byte, n)
			for i := range data {
				data[i] = byte(i * 31)
			}
			hdr, err := AppendHeader(nil, n+sealSize(c), c)
			if err != nil {
				t.Fatal(err)
			}
			parts := append(append([]byte(nil), data...), appendSeal(nil, hdr, data, c)...)
			whole := append(append([]byte(nil), hdr...), data...)
			if c == Zstd {
				whole = appendSkip(whole)
			}
			whole = binary.BigEndian.AppendUint32(whole, crc32.Update(0, castagnoli, whole))
			if !bytes.Equal(parts, whole[len(hdr):]) {
				t.Fatalf("%v %d: the two seals differ", c, n)
			}
			body, err := unseal(parts, c)
			if err != nil || !bytes.Equal(body, data) {
				t.Fatalf("%v %d: unseal: %v", c, n, err)
			}
		}
	}
	p := []byte("header and more")
	if crcSmall(7, p) != crc32.Update(7, castagnoli, p) {
		t.Fatal("crcSmall is not crc32.Update")
	}
}
