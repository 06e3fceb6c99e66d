package benchkit

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHistogramBuckets(t *testing.T) {
	// Every value falls in a bucket whose bounds hold it, and a bucket is
	// at most 1/16 of its low bound wide: the precision the table claims.
	vals := []int64{0, 1, 15, 16, 17, 31, 32, 33, 1000, 1023, 1024, 123456789, math.MaxInt64 / 3, math.MaxInt64}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		vals = append(vals, rng.Int64N(1<<uint(rng.IntN(62)+1)))
	}
	prev := -1
	slices.Sort(vals)
	for _, v := range vals {
		i := bucketOf(v)
		require.Less(t, i, histBuckets, "v %d", v)
		require.GreaterOrEqual(t, i, prev, "buckets out of order at %d", v)
		prev = i
		lo, hi := bucketLow(i), bucketHigh(i)
		require.True(t, lo <= v && v <= hi, "v %d in bucket %d [%d, %d]", v, i, lo, hi)
		if v >= subBuckets && i < histBuckets-1 {
			assert.LessOrEqual(t, float64(hi-lo+1), float64(lo)/subBuckets, "bucket %d too wide", i)
		}
	}
	for i := range histBuckets - 1 {
		require.Equal(t, bucketHigh(i)+1, bucketLow(i+1), "gap after bucket %d", i)
	}
}

func TestHistogramQuantiles(t *testing.T) {
	var h Histogram
	assert.Zero(t, h.Quantile(0.99), "empty")

	// 1..1000 µs, each once: the sample of rank ceil(q·n) is q·1000 µs.
	for i := 1000; i >= 1; i-- {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	require.EqualValues(t, 1000, h.n)
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}, {0.999, 999 * time.Microsecond}, {1, 1000 * time.Microsecond}, {0, time.Microsecond}} {
		got := h.Quantile(c.q)
		assert.GreaterOrEqual(t, got, c.want, "q %v", c.q)
		assert.LessOrEqual(t, float64(got), float64(c.want)*(1+1.0/subBuckets), "q %v: %v", c.q, got)
	}
	assert.Equal(t, 1000*time.Microsecond, h.max)
	assert.Equal(t, h.max, h.Quantile(1), "the top quantile is the largest sample, not its bucket's bound")

	// A tail: 98.9% fast, 1.1% slow. p99 must land in the slow part,
	// p50 in the fast one: the off-by-one that would hide a tail.
	var tail Histogram
	for range 989 {
		tail.Record(2 * time.Microsecond)
	}
	for range 11 {
		tail.Record(5 * time.Millisecond)
	}
	fast := bucketHigh(bucketOf(2000)) // 2 µs, as its bucket reads back
	assert.EqualValues(t, fast, tail.Quantile(0.5))
	assert.Equal(t, 5*time.Millisecond, tail.Quantile(0.99))
	assert.EqualValues(t, fast, tail.Quantile(0.989))

	// points and fromPoints keep every count and the quantiles.
	back := FromPoints(tail.Points())
	assert.Equal(t, tail.n, back.n)
	assert.Equal(t, tail.Quantile(0.99), back.Quantile(0.99))
	assert.Equal(t, tail.Quantile(0.5), back.Quantile(0.5))

	var merged Histogram
	merged.Merge(&h)
	merged.Merge(&tail)
	assert.EqualValues(t, 2000, merged.n)
	assert.Equal(t, 5*time.Millisecond, merged.max)
}

// TestHistogramJSON: a Histogram survives the trip from the process
// that measured (dio-check's co-tenant), and a message that does not add
// up is refused.
func TestHistogramJSON(t *testing.T) {
	var h Histogram
	for i := range 5000 {
		h.Record(time.Duration(800+i*i%900000) * time.Nanosecond)
	}
	type msg struct {
		ReadsS float64    `json:"reads_s,omitempty"`
		Hist   *Histogram `json:"hist,omitempty"`
	}
	data, err := json.Marshal(msg{ReadsS: 123.5, Hist: &h})
	require.NoError(t, err)
	var m msg
	require.NoError(t, json.Unmarshal(data, &m))
	require.NotNil(t, m.Hist)
	assert.Equal(t, h, *m.Hist)
	assert.Equal(t, 123.5, m.ReadsS)
	for _, bad := range []string{
		`{"counts":{"3":2},"n":3,"max_ns":9}`,  // the counts do not add up
		`{"counts":{"-1":1},"n":1,"max_ns":9}`, // no such bucket
		`{"counts":{"99999":1},"n":1,"max_ns":9}`,
	} {
		var g Histogram
		assert.Error(t, json.Unmarshal([]byte(bad), &g), bad)
	}
}
