package direct

import (
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkStatsRecord measures what counting costs an operation: begin
// and end around nothing (two clock reads, the atomic adds), alone and
// from every P at once, with every goroutine on one shard (as one set of
// process-wide counters would be) and each on its own; with a Meter,
// and with a Meter that watches for slow I/O.
func BenchmarkStatsRecord(b *testing.B) {
	m, _ := NewMeter(&MeterOptions{SyncLatency: true})
	w, _ := NewMeter(&MeterOptions{Slow: &SlowPolicy{Threshold: time.Hour, Report: func(SlowIO) {}}})
	defer w.Close()
	for _, c := range []struct {
		name  string
		meter *Meter
	}{{"meter=none", nil}, {"meter=counts", m}, {"meter=watch", w}} {
		b.Run(c.name+"/serial", func(b *testing.B) {
			x := xfer{direct: true, meter: c.meter}
			for b.Loop() {
				t := x.begin(OpRead, 0, 4096)
				x.end(t, PathPwrite, OpRead, 4096, nil, 0)
			}
		})
		for _, sharded := range []bool{false, true} {
			name := c.name + "/parallel/shards=1"
			if sharded {
				name = c.name + "/parallel/shards=8"
			}
			b.Run(name, func(b *testing.B) {
				var next atomic.Uint32
				b.RunParallel(func(pb *testing.PB) {
					x := xfer{direct: true, meter: c.meter}
					if sharded {
						x.shard = uint8(next.Add(1) % statShards)
					}
					for pb.Next() {
						t := x.begin(OpRead, 0, 4096)
						x.end(t, PathPwrite, OpRead, 4096, nil, 0)
					}
				})
			})
		}
	}
}

// BenchmarkStatsSnapshot measures Stats, which adds up every shard.
func BenchmarkStatsSnapshot(b *testing.B) {
	for b.Loop() {
		_ = Stats()
	}
}

// BenchmarkMonotonic measures one read of the statistics' clock.
func BenchmarkMonotonic(b *testing.B) {
	var sum int64
	for b.Loop() {
		sum += monotonic()
	}
	_ = sum
}
