package fallback_test

import (
	"expvar"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dio-storage/dio/fallback"
)

// ExampleStats shows the paths Open chose and the fallbacks it took,
// published beside direct.Stats through expvar.
func ExampleStats() {
	if expvar.Get("dio_open") == nil { // Publish panics on a name taken
		expvar.Publish("dio_open", expvar.Func(func() any { return fallback.Stats() }))
	}

	dir, err := os.MkdirTemp("", "fallback-stats-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	before := fallback.Stats()
	f, err := fallback.Open(filepath.Join(dir, "f"), os.O_RDWR|os.O_CREATE, 0o644, fallback.StdFS)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	s := fallback.Stats().Sub(before)
	fmt.Println("std-fs files:", s.StdFS, "fallbacks:", s.NoURing+s.URingAvoided+s.NoDirect+s.NoDontCache)
	// Output: std-fs files: 1 fallbacks: 0
}
