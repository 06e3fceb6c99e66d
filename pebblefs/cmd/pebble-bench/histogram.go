//go:build unix

package main

import (
	"math/bits"
	"time"
)

// histogram counts latencies in log-linear buckets (16 per power of
// two, so a quantile is within 1/16 of the truth) in fixed memory: a
// 2,000,000-record load kept as a slice of durations took 16 MB per
// copy, and the Go heap it left behind was enough to push Pebble on
// pebblefs, whose cgroup has no page cache to give back, over its
// memory limit.
type histogram struct {
	counts [64 * 16]uint64
	n      uint64
}

const subBits = 4 // 16 sub-buckets per power of two

func bucketOf(ns uint64) int {
	if ns < 1<<subBits {
		return int(ns)
	}
	exp := bits.Len64(ns) - 1 // ns in [2^exp, 2^(exp+1))
	sub := (ns >> (exp - subBits)) & (1<<subBits - 1)
	return (exp-subBits+1)<<subBits + int(sub)
}

// lowerBound is the smallest duration bucket i holds.
func lowerBound(i int) uint64 {
	if i < 1<<subBits {
		return uint64(i)
	}
	exp := i>>subBits + subBits - 1
	sub := uint64(i & (1<<subBits - 1))
	return 1<<exp | sub<<(exp-subBits)
}

func (h *histogram) add(d time.Duration) {
	h.counts[bucketOf(uint64(max(d, 0)))]++
	h.n++
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// quantile returns the q-quantile in microseconds (the middle of its
// bucket), 0 for an empty histogram.
func (h *histogram) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q * float64(h.n-1))
	seen := uint64(0)
	for i, c := range h.counts {
		seen += c
		if seen > rank {
			lo, hi := lowerBound(i), lowerBound(i+1)
			return float64(lo+hi) / 2 / 1e3
		}
	}
	return 0
}
