//go:build unix

package main

import (
	"math"
	"testing"
	"time"
)

// TestHistogram: quantiles come within a bucket's width (1/16) of the
// exact ones, from nanoseconds to seconds, and merging adds counts.
func TestHistogram(t *testing.T) {
	var a, b histogram
	for i := 1; i <= 100_000; i++ {
		d := time.Duration(i) * 37 * time.Nanosecond // 37 ns to 3.7 ms
		if i%2 == 0 {
			a.add(d)
		} else {
			b.add(d)
		}
	}
	a.merge(&b)
	if a.n != 100_000 {
		t.Fatalf("%d counted", a.n)
	}
	for _, q := range []float64{0.001, 0.5, 0.99, 0.999} {
		exact := float64(1+int(q*99_999)) * 37 / 1e3
		if got := a.quantile(q); math.Abs(got-exact) > exact/16+0.001 {
			t.Errorf("q%v: %.3f µs, exact %.3f µs", q, got, exact)
		}
	}
	var h histogram
	h.add(3 * time.Second)
	if got := h.quantile(0.5); math.Abs(got-3e6) > 3e6/16 {
		t.Errorf("3 s read as %.0f µs", got)
	}
	if (&histogram{}).quantile(0.5) != 0 {
		t.Error("an empty histogram has a quantile")
	}
}
