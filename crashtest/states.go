//go:build linux

package crashtest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// The kinds of crash state.
const (
	// KindFlush is the disk at a flush: every write before it, none
	// after it.
	KindFlush = "flush"
	// KindSubset is the disk between two flushes: every write before
	// the first, and some of the writes issued since, applied in any
	// order (a disk's write cache may persist any of them).
	KindSubset = "subset"
	// KindTorn is a subset in which one more write landed only in part:
	// some of its sectors, not all.
	KindTorn = "torn"
)

// An interval is the part of a recording between two flushes.
type interval struct {
	start  int   // the index of the flush it starts at; -1: the log's start
	end    int   // the index of the flush that ends it, or len(events)
	writes []int // the indexes of its writes
	flush  int   // how many flushes came before it
}

// intervals cuts a recording at its flushes.
func intervals(ev []event) []interval {
	iv := []interval{{start: -1}}
	for i, e := range ev {
		cur := &iv[len(iv)-1]
		switch e.kind {
		case evWrite:
			cur.writes = append(cur.writes, i)
		case evFlush:
			cur.end = i
			iv = append(iv, interval{start: i, flush: cur.flush + 1})
		}
	}
	iv[len(iv)-1].end = len(ev)
	return iv
}

// A stateSpec says how to build one crash state from a recording: every
// write before interval's start, then writes (indexes into the events, in
// the order they are applied), then part of write torn.
type stateSpec struct {
	index    int // in the run's plan
	kind     string
	interval int
	writes   []int
	torn     int   // an event index, or -1
	sectors  []int // torn's sectors that landed
	nwrites  int   // the interval's number of writes
	nflushes int   // the recording's number of flushes
}

func (s *stateSpec) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "state %d (%s): after flush %d of %d", s.index, s.kind, s.interval, s.nflushes)
	if s.kind == KindFlush {
		fmt.Fprintf(&b, ", none of the %d writes since", s.nwrites)
		return b.String()
	}
	fmt.Fprintf(&b, ", %d of the %d writes since (events %s)", len(s.writes), s.nwrites, ranges(s.writes))
	if s.torn >= 0 {
		fmt.Fprintf(&b, ", event %d torn (sectors %s landed)", s.torn, ranges(s.sectors))
	}
	return b.String()
}

// maxRanges bounds how many runs ranges prints.
const maxRanges = 12

// ranges prints a list of numbers, runs shortened ("3-7 9"), the first
// maxRanges runs of them.
func ranges(v []int) string {
	s := slices.Clone(v)
	slices.Sort(s)
	var b strings.Builder
	runs := 0
	for i := 0; i < len(s); runs++ {
		if runs == maxRanges {
			fmt.Fprintf(&b, " ... (%d in all)", len(s))
			break
		}
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		if j > i {
			fmt.Fprintf(&b, "%d-%d", s[i], s[j])
		} else {
			fmt.Fprintf(&b, "%d", s[i])
		}
		i = j + 1
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

func (s *stateSpec) key() string {
	return fmt.Sprint(s.interval, s.writes, s.torn, s.sectors)
}

// planStates chooses n crash states of a recording: every flush (evenly
// spaced ones if there are more than n/2), then random subsets of the writes
// between two flushes, a third of them with one more write torn at the
// sector size. A state is never chosen twice; fewer than n come back only
// when the recording has no more.
func planStates(ev []event, n int, sector int64, rng *rand.Rand) []stateSpec {
	iv := intervals(ev)
	var out []stateSpec
	seen := map[string]bool{}
	add := func(s stateSpec) bool {
		k := s.key()
		if seen[k] {
			return false
		}
		seen[k] = true
		s.nwrites = len(iv[s.interval].writes)
		s.nflushes = len(iv) - 1
		out = append(out, s)
		return true
	}
	step := max(1, float64(len(iv))/float64(max(1, n/2)))
	for f := 0.0; int(f) < len(iv) && len(out) < n; f += step {
		add(stateSpec{kind: KindFlush, interval: int(f), torn: -1})
	}
	// The rest between flushes, an interval drawn by its writes.
	var pick []int
	for i, v := range iv {
		for range v.writes {
			pick = append(pick, i)
		}
	}
	if len(pick) == 0 {
		return out
	}
	for misses := 0; len(out) < n && misses < 50*n; {
		i := pick[rng.IntN(len(pick))]
		w := iv[i].writes
		s := stateSpec{kind: KindSubset, interval: i, torn: -1}
		p := rng.Float64()
		for _, e := range w {
			if rng.Float64() < p {
				s.writes = append(s.writes, e)
			}
		}
		rng.Shuffle(len(s.writes), func(a, b int) { s.writes[a], s.writes[b] = s.writes[b], s.writes[a] })
		if rng.IntN(3) == 0 {
			// Tear one write left out of the subset.
			var cand []int
			for _, e := range w {
				if int64(ev[e].n) > sector && !slices.Contains(s.writes, e) {
					cand = append(cand, e)
				}
			}
			if len(cand) > 0 {
				s.kind = KindTorn
				s.torn = cand[rng.IntN(len(cand))]
				nsec := int((int64(ev[s.torn].n) + sector - 1) / sector)
				q := rng.Float64()
				for len(s.sectors) == 0 || len(s.sectors) == nsec {
					s.sectors = s.sectors[:0]
					for k := range nsec {
						if rng.Float64() < q {
							s.sectors = append(s.sectors, k)
						}
					}
					q = rng.Float64()
				}
			}
		}
		if s.kind == KindSubset && len(s.writes) == len(w) {
			// Every write of the interval: the next flush's
			// image, with fewer marks (the flush state checks
			// more).
			misses++
			continue
		}
		if !add(s) {
			misses++
		}
	}
	// Built in the order of the recording, so that one replay serves
	// them all.
	slices.SortStableFunc(out, func(a, b stateSpec) int { return a.interval - b.interval })
	for i := range out {
		out[i].index = i + 1
	}
	return out
}

// marksBefore returns the marks recorded before event end.
func marksBefore(ev []event, end int) [][]byte {
	var m [][]byte
	for _, e := range ev[:end] {
		if e.kind == evMark {
			m = append(m, e.data)
		}
	}
	return m
}
