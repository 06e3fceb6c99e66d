package benchkit

import (
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"time"
)

// A Histogram records latencies in log-linear buckets, as HdrHistogram does:
// exact below 2^subBits nanoseconds, then 2^subBits buckets per power of
// two, so a value read back is within 1/16 (6.25%) of the true one. It
// takes any number of samples in constant memory and time per sample.
type Histogram struct {
	counts [histBuckets]uint64
	n      uint64
	max    time.Duration
}

const (
	subBits     = 4
	subBuckets  = 1 << subBits
	histBuckets = (64 - subBits + 1) * subBuckets
)

// bucketOf returns the bucket of v nanoseconds.
func bucketOf(v int64) int {
	if v < subBuckets {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - 1 // v is in [2^e, 2^(e+1))
	sub := int(v>>(e-subBits)) & (subBuckets - 1)
	return (e-subBits+1)*subBuckets + sub
}

// bucketLow returns the smallest value in bucket i.
func bucketLow(i int) int64 {
	if i < subBuckets {
		return int64(i)
	}
	e := i/subBuckets + subBits - 1
	sub := int64(i % subBuckets)
	return (subBuckets + sub) << (e - subBits)
}

// bucketHigh returns the largest value in bucket i.
func bucketHigh(i int) int64 {
	if i == histBuckets-1 {
		return math.MaxInt64
	}
	return bucketLow(i+1) - 1
}

// Record adds one sample.
func (h *Histogram) Record(d time.Duration) {
	h.counts[bucketOf(int64(d))]++
	h.n++
	h.max = max(h.max, d)
}

// histJSON is a Histogram as JSON carries it from a process that
// measured to one that reports: the buckets that hold samples, by index.
type histJSON struct {
	Counts map[int]uint64 `json:"counts"`
	N      uint64         `json:"n"`
	MaxNs  int64          `json:"max_ns"`
}

func (h *Histogram) MarshalJSON() ([]byte, error) {
	j := histJSON{Counts: map[int]uint64{}, N: h.n, MaxNs: int64(h.max)}
	for i, c := range h.counts {
		if c > 0 {
			j.Counts[i] = c
		}
	}
	return json.Marshal(j)
}

func (h *Histogram) UnmarshalJSON(data []byte) error {
	var j histJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*h = Histogram{n: j.N, max: time.Duration(j.MaxNs)}
	var sum uint64
	for i, c := range j.Counts {
		if i < 0 || i >= histBuckets {
			return fmt.Errorf("histogram: bucket %d of %d", i, histBuckets)
		}
		h.counts[i] = c
		sum += c
	}
	if sum != h.n {
		return fmt.Errorf("histogram: %d samples in the buckets, %d counted", sum, h.n)
	}
	return nil
}

// Merge adds o's samples.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// Quantile returns the value at or below which a fraction q of the
// samples lie: the highest value of the bucket holding the sample of rank
// ceil(q·n), capped at the largest sample. 0 without samples.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(time.Duration(bucketHigh(i)), h.max)
		}
	}
	return h.max
}

// A HistPoint is one non-empty bucket: its highest value and how many
// samples it holds, which is all a plot needs.
type HistPoint struct {
	HighNs int64  `json:"high_ns"`
	Count  uint64 `json:"count"`
}

// Points returns the non-empty buckets in order.
func (h *Histogram) Points() []HistPoint {
	var ps []HistPoint
	for i, c := range h.counts {
		if c > 0 {
			ps = append(ps, HistPoint{min(bucketHigh(i), int64(h.max)), c})
		}
	}
	return ps
}

// FromPoints rebuilds a Histogram from its points.
func FromPoints(ps []HistPoint) *Histogram {
	h := new(Histogram)
	for _, p := range ps {
		h.counts[bucketOf(p.HighNs)] += p.Count
		h.n += p.Count
		h.max = max(h.max, time.Duration(p.HighNs))
	}
	return h
}

// Count returns the number of samples.
func (h *Histogram) Count() uint64 { return h.n }

// Max returns the largest sample.
func (h *Histogram) Max() time.Duration { return h.max }
