package fileio_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/dio-storage/dio/fileio"
)

func Example() {
	dir, err := os.MkdirTemp("", "fileio-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "table")

	w, err := fileio.Create(path, nil) // O_DIRECT where the filesystem allows it
	if err != nil {
		panic(err)
	}
	for i := range 3 {
		fmt.Fprintf(w, "record %d\n", i) // any size: the Writer keeps the transfers aligned
	}
	if err := w.Sync(); err != nil { // durable: Synced() is Size()
		panic(err)
	}
	io.WriteString(w, "footer\n")
	if err := w.Close(); err != nil { // writes the tail, truncates to Size, fdatasyncs
		panic(err)
	}

	r, err := fileio.Open(path, nil)
	if err != nil {
		panic(err)
	}
	defer r.Close()
	p := make([]byte, 8)
	if _, err := r.ReadAt(p, 9); err != nil { // any offset and length, from any goroutine
		panic(err)
	}
	fmt.Printf("%q of %d bytes\n", p, r.Size())

	seq, err := r.NewSequential(0) // reads ahead: for scans, io.Copy, bufio
	if err != nil {
		panic(err)
	}
	defer seq.Close()
	lines := bufio.NewScanner(seq)
	for lines.Scan() {
		fmt.Println(lines.Text())
	}
	// Output:
	// "record 1" of 34 bytes
	// record 0
	// record 1
	// record 2
	// footer
}
