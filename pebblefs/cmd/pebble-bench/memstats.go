//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// memStatsEnv, when set, makes a child print every few seconds where its
// memory is: the Go heap (live, its goal, what Go keeps resident), the
// C memory Pebble allocates by hand (block cache, memtables), the
// resident anonymous memory of the process, and what is left of it
// beside those two: dio's aligned buffers, and malloc's own slack.
const memStatsEnv = "PEBBLE_BENCH_MEMSTATS"

// smapsEnv names a directory where a child with memStatsEnv set keeps a
// copy of /proc/self/smaps from the moment its RssAnon peaked.
const smapsEnv = "PEBBLE_BENCH_SMAPS"

func startMemStats(db *pebble.DB) func() {
	if os.Getenv(memStatsEnv) == "" {
		return func() {}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		peak := int64(0)
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			fmt.Fprintln(os.Stderr, memLine(db))
			if dir := os.Getenv(smapsEnv); dir != "" {
				if a := statusKB("RssAnon"); a > peak {
					peak = a
					if data, err := os.ReadFile("/proc/self/smaps"); err == nil {
						_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("smaps-%d", os.Getpid())), data, 0o644)
					}
				}
			}
		}
	}()
	return func() { close(stop); <-done }
}

var goMetrics = []string{
	"/gc/heap/live:bytes",         // live heap after the last GC
	"/gc/heap/goal:bytes",         // where the next GC starts
	"/memory/classes/total:bytes", // all Go maps
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/objects:bytes",
}

// memLine returns one line of where the memory is, in MiB.
func memLine(db *pebble.DB) string {
	s := make([]metrics.Sample, len(goMetrics))
	for i, n := range goMetrics {
		s[i].Name = n
	}
	metrics.Read(s)
	v := func(i int) int64 { return int64(s[i].Value.Uint64()) }
	goResident := v(2) - v(3)
	pm := db.Metrics()
	cgo := int64(0)
	if _, rest, ok := strings.Cut(pm.String(), "Cgo memory usage: "); ok {
		cgo = parseHuman(strings.Fields(rest)[0])
	}
	anon := statusKB("RssAnon")
	line := fmt.Sprintf("memstats: anon %d, go resident %d (live %d, objects %d, free %d, goal %d), cgo %d (block cache %d, memtables %d x%d), rest %d MiB",
		anon>>20, goResident>>20, v(0)>>20, v(5)>>20, v(4)>>20, v(1)>>20, cgo>>20,
		pm.BlockCache.Size>>20, pm.MemTable.Size>>20, pm.MemTable.Count, (anon-goResident-cgo)>>20)
	if f := memHook; f != nil {
		line += "; " + f()
	}
	return line
}

// memHook, when set, adds the file layer's own accounting to memLine.
var memHook func() string

// parseHuman reads Pebble's humanized sizes ("12MB", "1.5GB", IEC) as bytes.
func parseHuman(s string) int64 {
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(s)
	}
	f, _ := strconv.ParseFloat(s[:i], 64)
	mult := map[string]float64{"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}[s[i:]]
	return int64(f * mult)
}

// statusKB returns a field of /proc/self/status in bytes.
func statusKB(field string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
