package fallback_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/dio-storage/dio/fallback"
)

func ExampleOpen() {
	dir, err := os.MkdirTemp("", "dio-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	f, err := fallback.Open(filepath.Join(dir, "data"), os.O_RDWR|os.O_CREATE, 0o644, fallback.StdFS)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	// With fallback.Auto this would read "direct+io_uring" on a disk that
	// takes O_DIRECT, or "std-fs: ramfs rejected O_DIRECT: invalid argument;
	// RWF_DONTCACHE: operation not supported".
	fmt.Println(f.Mode())
	// Output: std-fs
}
