package ephemeral_test

import (
	"fmt"
	"os"

	"github.com/dio-storage/dio/ephemeral"
)

func Example() {
	f, err := ephemeral.Create(os.TempDir(), nil) // no name: gone on Close or crash
	if err != nil {
		panic(err)
	}
	defer f.Close()

	off, err := f.WriteBlob([]byte("a value"))
	if err != nil {
		panic(err)
	}
	if _, err := f.Write([]byte(" and raw bytes")); err != nil {
		panic(err)
	}
	// Readable at once, from the buffer that has not reached the disk yet.
	blob, err := f.ReadBlob(off, nil)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q, file of %d bytes\n", blob, f.Size())
	// Output: "a value", file of 22 bytes
}
