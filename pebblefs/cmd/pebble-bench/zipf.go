//go:build unix

package main

import (
	"math"
	"math/rand/v2"
)

// zipfTheta is YCSB's zipfian constant.
const zipfTheta = 0.99

// zipf draws item indexes in [0, n) with YCSB's scrambled zipfian
// distribution: Gray et al.'s zipfian over [0, n) (a few items hot, the
// rest a long tail), then an FNV hash, so that the hot items are spread
// over the key space rather than bunched at its start.
type zipf struct {
	n                         uint64
	alpha, zetan, eta, halfPo float64
}

func newZipf(n uint64) *zipf {
	z := &zipf{n: n, alpha: 1 / (1 - zipfTheta)}
	var zeta2 float64
	for i := uint64(1); i <= n; i++ {
		z.zetan += 1 / math.Pow(float64(i), zipfTheta)
		if i == 2 {
			zeta2 = z.zetan
		}
	}
	z.eta = (1 - math.Pow(2/float64(n), 1-zipfTheta)) / (1 - zeta2/z.zetan)
	z.halfPo = 1 + math.Pow(0.5, zipfTheta)
	return z
}

// next returns an item index.
func (z *zipf) next(r *rand.Rand) uint64 {
	u := r.Float64()
	uz := u * z.zetan
	var i uint64
	switch {
	case uz < 1:
		i = 0
	case uz < z.halfPo:
		i = 1
	default:
		i = uint64(float64(z.n) * math.Pow(z.eta*u-z.eta+1, z.alpha))
	}
	return fnv64(i) % z.n
}

// fnv64 is FNV-1a over the 8 bytes of v, as YCSB hashes record numbers.
func fnv64(v uint64) uint64 {
	h := uint64(0xcbf29ce484222325)
	for range 8 {
		h ^= v & 0xff
		h *= 0x100000001b3
		v >>= 8
	}
	return h
}
