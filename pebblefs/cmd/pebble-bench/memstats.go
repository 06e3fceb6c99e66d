package main

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"os"
	"runtime"
	"strings"
	"time"
)

// memStatsEnv, when set, makes a child print every few seconds where its
// memory is: the Go heap, and the resident anonymous memory beside it
// (Pebble's block cache and memtables, dio's aligned buffers).
const memStatsEnv = "PEBBLE_BENCH_MEMSTATS"

func startMemStats(db *pebble.DB) func() {
	if os.Getenv(memStatsEnv) == "" {
		return func() {}
	}
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			pm := db.Metrics()
			fmt.Fprintf(os.Stderr, "memstats: heap in use %d MiB, heap sys %d MiB, released %d MiB, go sys %d MiB, block cache %d MiB, memtables %d MiB (%d), %s\n",
				m.HeapInuse>>20, m.HeapSys>>20, m.HeapReleased>>20, m.Sys>>20, pm.BlockCache.Size>>20, pm.MemTable.Size>>20, pm.MemTable.Count, rss())
		}
	}()
	return func() { close(stop) }
}

func rss() string {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return ""
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "RssAnon") || strings.HasPrefix(l, "RssFile") {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
	}
	return strings.Join(out, ", ")
}
