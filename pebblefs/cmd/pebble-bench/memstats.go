package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

// memStatsEnv, when set, makes a child print every few seconds where its
// memory is: the Go heap, and the resident anonymous memory beside it
// (Pebble's block cache and memtables, dio's aligned buffers).
const memStatsEnv = "PEBBLE_BENCH_MEMSTATS"

func startMemStats() func() {
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
			fmt.Fprintf(os.Stderr, "memstats: heap in use %d MiB, heap sys %d MiB, released %d MiB, go sys %d MiB, %s\n",
				m.HeapInuse>>20, m.HeapSys>>20, m.HeapReleased>>20, m.Sys>>20, rss())
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
