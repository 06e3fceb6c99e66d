// Package promdio exports dio's I/O statistics to Prometheus: a
// prometheus.Collector over direct.Stats and fallback.Stats, read at
// every scrape. It is an example to copy into a service, in a module of
// its own so that dio's go.mod needs no Prometheus:
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(promdio.NewCollector())
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// The metrics, all prefixed dio_:
//
//	io_operations_total{op,path}       operations completed (op: read, write, fdatasync, truncate, fsync-dir)
//	io_errors_total{op,path,errno}     failed operations, by errno ("other", "none" for the rest)
//	io_retries_total{op,path}          system calls made again inside operations (EINTR, EAGAIN, short transfers)
//	io_device_bytes_total{op,path}     bytes the device moved
//	io_asked_bytes_total{op,path}      bytes callers of dio's readers and writers asked for
//	io_latency_seconds{op,path}        a histogram of operations' latencies
//	io_sector_errors_total             unreadable sectors found by split reads
//	io_writer_retries_total            writes and syncs writers made again after ENOSPC, EDQUOT or EIO
//	io_slow_total                      operations reported slow while in flight
//	uring_rings, io_in_flight          gauges: io_uring rings set up, requests in flight
//	uring_enters_total, uring_submitted_total, uring_wakes_total, uring_reaped_total
//	files_opened_total{mode}           files fallback.Open opened, by mode
//	fallbacks_total{cause}             the fallbacks it took, by cause
//
// Only the operations and paths that have counted anything appear. The
// latency histogram's buckets are every factor of four from 1.024 µs to
// about 69 s (LatencyBounds), each the edge of one of dio's own
// buckets, so their counts are exact.
package promdio

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/fallback"
)

// LatencyBounds are the upper bounds of the exported latency buckets:
// 2^10 ns (1.024 µs) to 2^36 ns (68.7 s), a factor of four apart. Any
// power of two from 2^4 ns up is the edge of one of dio's buckets.
var LatencyBounds = func() []time.Duration {
	var b []time.Duration
	for d := time.Duration(1) << 10; d <= 1<<36; d <<= 2 {
		b = append(b, d)
	}
	return b
}()

var (
	labels   = []string{"op", "path"}
	descOps  = desc("io_operations_total", "I/O operations completed.", labels...)
	descErrs = desc("io_errors_total", "I/O operations that failed, by errno.", "op", "path", "errno")
	descRetr = desc("io_retries_total", "System calls made again inside I/O operations (EINTR, EAGAIN, short transfers).", labels...)
	descDev  = desc("io_device_bytes_total", "Bytes the device moved.", labels...)
	descAsk  = desc("io_asked_bytes_total", "Bytes callers of dio's readers and writers asked for.", labels...)
	descLat  = desc("io_latency_seconds", "Latency of I/O operations.", labels...)
	descSect = desc("io_sector_errors_total", "Unreadable sectors found by reads split after EIO.")
	descWRet = desc("io_writer_retries_total", "Writes and syncs writers made again after ENOSPC, EDQUOT or EIO.")
	descSlow = desc("io_slow_total", "Operations reported slow while in flight.")
	descRing = desc("uring_rings", "io_uring rings set up.")
	descInFl = desc("io_in_flight", "Requests queues accepted and have not completed.")
	descEnt  = desc("uring_enters_total", "io_uring_enter calls that submitted requests.")
	descSub  = desc("uring_submitted_total", "Requests submitted by io_uring_enter.")
	descWake = desc("uring_wakes_total", "Reaps that found completions.")
	descReap = desc("uring_reaped_total", "Completions reaped.")
	descOpen = desc("files_opened_total", "Files fallback.Open opened, by mode.", "mode")
	descFall = desc("fallbacks_total", "Fallbacks fallback.Open took, by cause.", "cause")
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("dio_"+name, help, labels, nil)
}

// Collector reads dio's statistics at every scrape.
type Collector struct{}

// NewCollector returns a Collector to register.
func NewCollector() *Collector { return &Collector{} }

// Describe implements prometheus.Collector.
func (*Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descOps, descErrs, descRetr, descDev, descAsk, descLat, descSect, descWRet,
		descSlow, descRing, descInFl, descEnt, descSub, descWake, descReap, descOpen, descFall} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (*Collector) Collect(ch chan<- prometheus.Metric) {
	s := direct.Stats()
	for _, p := range direct.Paths() {
		for _, op := range []direct.Op{direct.OpRead, direct.OpWrite, direct.OpSync, direct.OpTruncate} {
			collectOp(ch, op.String(), p.String(), s.Paths[p].Op(op))
		}
	}
	collectOp(ch, direct.OpSyncDir.String(), "none", &s.DirSync)

	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	counter(descSect, s.SectorErrors)
	counter(descWRet, s.WriterRetries)
	counter(descSlow, s.Slow)
	gauge(descRing, s.Engine.Rings)
	gauge(descInFl, s.Engine.InFlight)
	counter(descEnt, s.Engine.Enters)
	counter(descSub, s.Engine.Submitted)
	counter(descWake, s.Engine.Wakes)
	counter(descReap, s.Engine.Reaped)

	o := fallback.Stats()
	counter(descOpen, o.URing, "direct+io_uring")
	counter(descOpen, o.Pwrite, "direct+pwrite")
	counter(descOpen, o.StdFS, "std-fs")
	counter(descOpen, o.DontCache, "std-fs+dontcache")
	counter(descFall, o.NoURing, "io_uring refused")
	counter(descFall, o.URingAvoided, "io_uring avoided")
	counter(descFall, o.NoDirect, "O_DIRECT refused")
	counter(descFall, o.NoDontCache, "RWF_DONTCACHE refused")
}

// collectOp sends one operation's metrics on one path, if it has any.
func collectOp(ch chan<- prometheus.Metric, op, path string, s *direct.OpStats) {
	if s.Ops == 0 && s.Asked == 0 {
		return
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(descOps, s.Ops, op, path)
	counter(descRetr, s.Retries, op, path)
	counter(descDev, s.Bytes, op, path)
	counter(descAsk, s.Asked, op, path)
	for errno, n := range s.Errnos.All() {
		counter(descErrs, n, op, path, errno)
	}
	ch <- prometheus.MustNewConstHistogram(descLat, s.Latency.Count(), s.Latency.Sum.Seconds(), Buckets(s.Latency), op, path)
}

// Buckets returns h's cumulative counts at LatencyBounds.
func Buckets(h direct.Histogram) map[float64]uint64 {
	out := make(map[float64]uint64, len(LatencyBounds))
	var cum uint64
	i := 0
	for _, le := range LatencyBounds {
		for ; i < direct.HistogramBuckets; i++ {
			if _, hi := direct.BucketBounds(i); hi > le {
				break
			}
			cum += h.Counts[i]
		}
		out[le.Seconds()] = cum
	}
	return out
}
