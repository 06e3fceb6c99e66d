//go:build unix

package main

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// result is one workload's outcome on one filesystem.
type result struct {
	FS             string  `json:"fs"`
	Workload       string  `json:"workload"`
	Ops            int     `json:"ops"`
	Seconds        float64 `json:"seconds"`
	OpsPerSec      float64 `json:"ops_s"`
	P50us          float64 `json:"p50_us"`
	P99us          float64 `json:"p99_us"`
	P999us         float64 `json:"p999_us"`
	ReadP50us      float64 `json:"read_p50_us,omitempty"` // Gets (and scans, in E)
	ReadP99us      float64 `json:"read_p99_us,omitempty"`
	ReadP999us     float64 `json:"read_p999_us,omitempty"`
	UpdateP50us    float64 `json:"update_p50_us,omitempty"` // Sets (updates and inserts)
	UpdateP99us    float64 `json:"update_p99_us,omitempty"`
	UpdateP999us   float64 `json:"update_p999_us,omitempty"`
	DeviceReadB    float64 `json:"device_read_bytes_per_op"`  // the process's storage reads (/proc/self/io), per op
	DeviceWriteB   float64 `json:"device_write_bytes_per_op"` // and writes
	CPUus          float64 `json:"cpu_us_per_op"`
	PeakBytes      int64   `json:"memory_peak_bytes"`
	PageCacheBytes int64   `json:"page_cache_bytes"`
	StallSeconds   float64 `json:"write_stall_s"` // Pebble's write stalls, summed
	CPUSeconds     float64 `json:"cpu_s"`         // the engine's process, user and system
}

// mix is a YCSB core workload: the share of each operation, in percent.
type mix struct {
	read, update, scan, insert int
}

var workloads = map[string]mix{
	"a":    {read: 50, update: 50}, // update heavy
	"b":    {read: 95, update: 5},  // read mostly
	"c":    {read: 100},            // read only
	"e":    {scan: 95, insert: 5},  // short ranges
	"load": {insert: 100},          // the load phase
}

// ycsbKey is record n's key: YCSB's "user" and the hash of n, so inserts
// land all over the key space.
func ycsbKey(dst []byte, n uint64) []byte {
	return fmt.Appendf(dst[:0], "user%019d", fnv64(n))
}

// bench runs workloads against one store.
type bench struct {
	db      *pebble.DB
	threads int
	value   int
	records uint64        // records loaded; reads choose among them
	next    atomic.Uint64 // the next record an insert creates
	zipf    *zipf
}

// run runs ops operations of workload w, split over the threads, and
// returns the ops done, the time they took and each one's latency.
func (b *bench) run(name string, ops int) (result, error) {
	w := workloads[name]
	var (
		wg            sync.WaitGroup
		mu            sync.Mutex
		lats          histogram
		reads, writes histogram
		err           error
	)
	start := time.Now()
	for t := range b.threads {
		n := ops / b.threads
		if t < ops%b.threads {
			n++
		}
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(t), uint64(start.UnixNano())))
			var mine, myReads, myWrites histogram
			val := make([]byte, b.value+64)
			for i := range val {
				val[i] = byte(r.Uint32())
			}
			var key []byte
			for range n {
				op := r.IntN(100)
				t0 := time.Now()
				var e error
				switch {
				case op < w.read:
					key = ycsbKey(key, b.zipf.next(r))
					var closer interface{ Close() error }
					_, closer, e = b.db.Get(key)
					if e == nil {
						closer.Close()
					}
				case op < w.read+w.update:
					key = ycsbKey(key, b.zipf.next(r))
					off := r.IntN(64)
					e = b.db.Set(key, val[off:off+b.value], pebble.NoSync)
				case op < w.read+w.update+w.scan:
					key = ycsbKey(key, b.zipf.next(r))
					e = b.scan(key, 1+r.IntN(100))
				default:
					key = ycsbKey(key, b.next.Add(1)-1)
					off := r.IntN(64)
					e = b.db.Set(key, val[off:off+b.value], pebble.NoSync)
				}
				lat := time.Since(t0)
				mine.add(lat)
				if op < w.read || (op >= w.read+w.update && op < w.read+w.update+w.scan) {
					myReads.add(lat)
				} else {
					myWrites.add(lat)
				}
				if e != nil {
					mu.Lock()
					err = e
					mu.Unlock()
					return
				}
			}
			mu.Lock()
			lats.merge(&mine)
			reads.merge(&myReads)
			writes.merge(&myWrites)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err != nil {
		return result{}, fmt.Errorf("%s: %w", name, err)
	}
	return result{
		Workload:     name,
		Ops:          int(lats.n),
		Seconds:      elapsed.Seconds(),
		OpsPerSec:    float64(lats.n) / elapsed.Seconds(),
		P50us:        lats.quantile(0.50),
		P99us:        lats.quantile(0.99),
		P999us:       lats.quantile(0.999),
		ReadP50us:    reads.quantile(0.50),
		ReadP99us:    reads.quantile(0.99),
		ReadP999us:   reads.quantile(0.999),
		UpdateP50us:  writes.quantile(0.50),
		UpdateP99us:  writes.quantile(0.99),
		UpdateP999us: writes.quantile(0.999),
	}, nil
}

// scan reads up to n records from key on, as YCSB's scan does.
func (b *bench) scan(key []byte, n int) error {
	it, err := b.db.NewIter(nil)
	if err != nil {
		return err
	}
	for ok := it.SeekGE(key); ok && n > 0; ok = it.Next() {
		_ = it.Value()
		n--
	}
	return it.Close()
}
