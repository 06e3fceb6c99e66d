package direct_test

import (
	"expvar"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dio-storage/dio/aligned"
	"github.com/dio-storage/dio/direct"
)

// ExampleStats reads the process's I/O statistics around a piece of
// work, publishes them through expvar (on /debug/vars of a service's
// HTTP server, with no dependency), and counts one file's I/O in a
// Meter that also reports slow operations.
func ExampleStats() {
	// expvar calls the function at every scrape; the histograms appear
	// as their count, mean and percentiles.
	if expvar.Get("dio") == nil { // Publish panics on a name taken
		expvar.Publish("dio", expvar.Func(func() any { return direct.Stats() }))
	}

	dir, err := os.MkdirTemp("", "direct-stats-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	m, err := direct.NewMeter(&direct.MeterOptions{Slow: &direct.SlowPolicy{
		Threshold: time.Second,
		Report:    func(s direct.SlowIO) { fmt.Println("slow:", s) },
	}})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	f, err := openDirect(filepath.Join(dir, "data"))
	if err != nil {
		panic(err)
	}
	f = f.WithMeter(m)
	defer f.Close()

	before := direct.Stats()
	b, err := aligned.New(direct.DefaultAlignment, direct.DefaultAlignment) // aligned for any device up to 4 KiB sectors
	if err != nil {
		panic(err)
	}
	defer b.Free()
	buf := b.Bytes()
	for i := range 3 {
		if _, err := f.WriteAt(buf, int64(i*len(buf))); err != nil {
			panic(err)
		}
	}
	if err := f.Sync(); err != nil {
		panic(err)
	}
	s := direct.Stats().Sub(before)
	fmt.Println("writes:", s.Write.Ops, "bytes:", s.Write.Bytes, "syncs:", s.Sync.Ops)
	fmt.Println("p99 under a second:", s.Write.Latency.Quantile(0.99) < time.Second)
	fmt.Println("this file's writes:", m.Stats().Write.Ops)
	// Output:
	// writes: 3 bytes: 12288 syncs: 1
	// p99 under a second: true
	// this file's writes: 3
}
