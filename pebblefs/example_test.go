//go:build unix

package pebblefs_test

import (
	"fmt"
	"log"
	"os"

	"github.com/cockroachdb/pebble/v2"
	"github.com/dio-storage/dio/pebblefs"
)

// Pebble on dio: the only change from Pebble on vfs.Default is Options.FS.
func Example() {
	dir, err := os.MkdirTemp("", "pebblefs-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := pebble.Open(dir, &pebble.Options{FS: pebblefs.New(nil)})
	if err != nil {
		log.Fatal(err)
	}
	if err := db.Set([]byte("hello"), []byte("world"), pebble.Sync); err != nil {
		log.Fatal(err)
	}
	if err := db.Flush(); err != nil { // an sstable, written with O_DIRECT
		log.Fatal(err)
	}
	v, closer, err := db.Get([]byte("hello"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("hello %s\n", v)
	closer.Close()
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}
	// Output: hello world
}
