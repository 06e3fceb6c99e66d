package appender_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/dio-storage/dio/fallback"
	"github.com/dio-storage/dio/internal/appender"
)

// An Appender turns small appends into whole aligned writes and leaves the
// file exactly as long as what was appended: the padded tail is cut back
// at Close.
func Example() {
	dir, err := os.MkdirTemp("", "appender-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "log")
	f, err := fallback.Open(path, os.O_CREATE|os.O_RDWR|os.O_EXCL, 0o600, fallback.Auto)
	if err != nil {
		log.Fatal(err)
	}
	a, err := appender.New(f, appender.Options{})
	if err != nil {
		log.Fatal(err)
	}
	for range 1000 {
		if _, err := a.Write([]byte("thirteen byte")); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("appended:", a.Size())
	if err := a.Close(); err != nil { // closes f too
		log.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("on disk:", st.Size())
	// Output:
	// appended: 13000
	// on disk: 13000
}
