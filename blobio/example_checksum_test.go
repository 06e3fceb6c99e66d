package blobio_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dio-storage/dio/blobio"
)

// ExampleOptions_checksum writes blobs with a CRC32C inside each, then
// flips one byte of the file: the Reader reports the blob as corrupt,
// naming its offset, instead of returning it.
func ExampleOptions_checksum() {
	dir, err := os.MkdirTemp("", "blobio-checksum-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "wal")

	opts := &blobio.Options{Checksum: true} // the Reader needs it too
	w, err := blobio.Create(path, opts)
	if err != nil {
		panic(err)
	}
	var offs []int64
	for _, v := range []string{"first", "second"} {
		off, err := w.WriteBlob([]byte(v))
		if err != nil {
			panic(err)
		}
		offs = append(offs, off)
	}
	if err := w.Close(); err != nil {
		panic(err)
	}

	// A bit flips on the way to the disk, or on it.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		panic(err)
	}
	if _, err := f.WriteAt([]byte("S"), offs[1]+1); err != nil {
		panic(err)
	}
	f.Close()

	r, err := blobio.Open(path, opts)
	if err != nil {
		panic(err)
	}
	defer r.Close()
	first, err := r.ReadBlob(offs[0], nil)
	fmt.Printf("%s %v\n", first, err)
	_, err = r.ReadBlob(offs[1], nil)
	var ce *blobio.CorruptError
	if errors.Is(err, blobio.ErrCorrupt) && errors.As(err, &ce) {
		fmt.Println("corrupt blob at", ce.Off)
	}
	// Output:
	// first <nil>
	// corrupt blob at 10
}
