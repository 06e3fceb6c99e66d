package blobio_test

import (
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
