//go:build unix

package main

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestParseFlags(t *testing.T) {
	c, err := parseFlags([]string{"-fs", "pebblefs", "-cache", "64MiB", "-workloads", "load,c", "/d"})
	if err != nil {
		t.Fatal(err)
	}
	if c.dir != "/d" || c.cache != 64<<20 || c.pebblefsCache != 64<<20 || !slices.Equal(c.workloads, []string{"load", "c"}) {
		t.Fatalf("parsed %+v", c)
	}
	c, err = parseFlags([]string{"-readahead", "8MiB", "-buffers", "32", "-pool", "16MiB", "-memtable", "64MiB", "-metrics", "/d"})
	if err != nil {
		t.Fatal(err)
	}
	if c.readAhead != 8<<20 || c.buffers != 32 || c.pool != 16<<20 || c.memtable != 64<<20 || !c.metrics {
		t.Fatalf("parsed %+v", c)
	}
	for _, bad := range [][]string{
		{"-readahead", "far", "/d"},
		{"-pool", "x", "/d"},
		{"-memtable", "big", "/d"},
		{},                        // no DIR
		{"-fs", "ext4", "/d"},     // unknown engine
		{"-workloads", "f", "/d"}, // unknown workload
		{"-memory", "lots", "/d"}, // not a size
	} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%q) accepted", bad)
		}
	}
}

// TestZipf checks the scrambled zipfian: every draw in range, a few items
// hot (YCSB's constant 0.99 over 1,000 items gives the hottest about 13%
// of draws), and the hot items spread over the key space.
func TestZipf(t *testing.T) {
	const n, draws = 1000, 200_000
	z := newZipf(n)
	r := rand.New(rand.NewPCG(1, 2))
	count := make([]int, n)
	for range draws {
		i := z.next(r)
		if i >= n {
			t.Fatalf("draw %d out of [0, %d)", i, n)
		}
		count[i]++
	}
	top := slices.Max(count)
	if top < draws/20 || top > draws/4 {
		t.Fatalf("hottest item drawn %d times of %d, want about 13%%", top, draws)
	}
	if hot := slices.Index(count, top); hot == 0 {
		t.Fatal("the hottest item is item 0: the draws are not scrambled")
	}
	if count := len(slices.DeleteFunc(count, func(c int) bool { return c == 0 })); count < n/2 {
		t.Fatalf("only %d of %d items ever drawn", count, n)
	}
}
