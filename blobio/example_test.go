package blobio_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dio-storage/dio/blobio"
)

func Example() {
	dir, err := os.MkdirTemp("", "blobio-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "layer")

	w, err := blobio.Create(path, nil) // O_DIRECT where the filesystem allows it
	if err != nil {
		panic(err)
	}
	var offs []int64
	for _, v := range []string{"hello", "page", "server"} {
		off, err := w.WriteBlob([]byte(v))
		if err != nil {
			panic(err)
		}
		offs = append(offs, off)
	}
	if err := w.Close(); err != nil { // pads, writes, truncates, fdatasyncs
		panic(err)
	}

	r, err := blobio.Open(path, nil)
	if err != nil {
		panic(err)
	}
	defer r.Close()
	blob, err := r.ReadBlob(offs[1], nil)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s at %d of %d bytes\n", blob, offs[1], r.Size())

	s := blobio.NewScanner(r)
	for s.Scan() {
		fmt.Println(s.Offset(), string(s.Bytes()))
	}
	if err := s.Err(); err != nil {
		panic(err)
	}
	// Output:
	// page at 6 of 18 bytes
	// 0 hello
	// 6 page
	// 11 server
}

// ExampleReader_ReadBlobs reads several blobs in one call: neighbours come
// in one aligned read, and fn gets each blob with its index in offs.
func ExampleReader_ReadBlobs() {
	dir, err := os.MkdirTemp("", "blobio-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "layer")

	w, err := blobio.Create(path, nil)
	if err != nil {
		panic(err)
	}
	var offs []int64
	for _, v := range []string{"key-1", "key-2", "key-3", "key-4"} {
		off, err := w.WriteBlob([]byte(v))
		if err != nil {
			panic(err)
		}
		offs = append(offs, off)
	}
	if err := w.Close(); err != nil {
		panic(err)
	}

	r, err := blobio.Open(path, nil)
	if err != nil {
		panic(err)
	}
	defer r.Close()
	want := []int64{offs[3], offs[0], offs[3]} // any order, repeats allowed
	got := make([]string, len(want))
	err = r.ReadBlobs(want, func(i int, blob []byte) error {
		got[i] = string(blob) // blob is valid only during the call: copy it
		return nil
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(got)

	err = r.ReadBlobs([]int64{offs[1], 1 << 20}, func(int, []byte) error { return nil })
	var be *blobio.BlobError
	fmt.Println(errors.Is(err, blobio.ErrOffset), errors.As(err, &be) && be.Index == 1)
	// Output:
	// [key-4 key-1 key-4]
	// true true
}
