//go:build linux

package crashtest

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// TestStatesImages builds the crash states of a random recording and
// compares each image with one made the slow way: base, then every write
// before the state's flush in order, then the state's writes, then the
// torn write's sectors. It also checks each state's marks and kind, and
// that writeTo puts the same bytes in a file.
func TestStatesImages(t *testing.T) {
	const size = 1 << 20
	const sector = 512
	rng := rand.New(rand.NewPCG(1, 2))
	base := pages{}
	for range 20 {
		p := new(page)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		base[rng.Int64N(size/pageSize)] = p
	}
	var ev []event
	for i := range 400 {
		switch r := rng.IntN(10); {
		case r < 6:
			n := sector * (1 + rng.IntN(32))
			off := int64(rng.IntN((size-n)/sector)) * sector
			e := event{kind: evWrite, off: off, n: n}
			if rng.IntN(8) != 0 {
				e.data = make([]byte, n)
				for k := range e.data {
					e.data[k] = byte(rng.Uint32())
				}
			}
			ev = append(ev, e)
		case r < 8:
			ev = append(ev, event{kind: evFlush})
		default:
			ev = append(ev, event{kind: evMark, data: []byte{byte(i)}})
		}
	}
	specs := planStates(ev, 300, sector, rng)
	if len(specs) != 300 {
		t.Fatalf("%d states planned, want 300", len(specs))
	}
	kinds := map[string]int{}
	for _, s := range specs {
		kinds[s.kind]++
	}
	if kinds[KindFlush] == 0 || kinds[KindSubset] == 0 || kinds[KindTorn] == 0 {
		t.Fatalf("states by kind: %v", kinds)
	}

	c := &Config{FS: Ext4, DiskSize: size}
	jobs := make(chan job)
	var mu sync.Mutex
	go func() {
		defer close(jobs)
		buildStates(context.Background(), c, ev, base, specs, jobs, &Report{}, &mu)
	}()
	iv := intervals(ev)
	file, err := os.Create(filepath.Join(t.TempDir(), "img"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if err := file.Truncate(size); err != nil {
		t.Fatal(err)
	}
	n := 0
	for j := range jobs {
		n++
		s := j.spec
		want := make([]byte, size)
		for i, p := range base {
			copy(want[i*pageSize:], p[:])
		}
		apply := func(e event, lo, hi int) {
			if e.data == nil {
				clear(want[e.off+int64(lo) : e.off+int64(hi)])
			} else {
				copy(want[e.off+int64(lo):], e.data[lo:hi])
			}
		}
		v := iv[s.interval]
		for _, e := range ev[:max(v.start, 0)] {
			if e.kind == evWrite {
				apply(e, 0, e.n)
			}
		}
		for _, w := range s.writes {
			if w <= v.start || w >= v.end || ev[w].kind != evWrite {
				t.Fatalf("%v: write %d is not one of its interval's (%d-%d)", &s, w, v.start, v.end)
			}
			apply(ev[w], 0, ev[w].n)
		}
		if s.torn >= 0 {
			nsec := (ev[s.torn].n + sector - 1) / sector
			if len(s.sectors) == 0 || len(s.sectors) >= nsec || slices.Contains(s.writes, s.torn) {
				t.Fatalf("%v: torn write of %d sectors with sectors %v", &s, nsec, s.sectors)
			}
			for _, k := range s.sectors {
				apply(ev[s.torn], k*sector, min((k+1)*sector, ev[s.torn].n))
			}
		}
		got := make([]byte, size)
		j.img.readAt(got, 0)
		if i := firstDiff(got, want); i >= 0 {
			t.Fatalf("%v: byte %d of its image differs", &s, i)
		}
		if err := j.img.fork().writeTo(file); err != nil {
			t.Fatal(err)
		}
		if _, err := file.ReadAt(got, 0); err != nil {
			t.Fatal(err)
		}
		if i := firstDiff(got, want); i >= 0 {
			t.Fatalf("%v: byte %d of the file writeTo wrote differs", &s, i)
		}
		var marks [][]byte
		for _, e := range ev[:v.end] {
			if e.kind == evMark {
				marks = append(marks, e.data)
			}
		}
		if !slices.EqualFunc(marks, j.marks, bytes.Equal) {
			t.Fatalf("%v: %d marks, want the %d before event %d", &s, len(j.marks), len(marks), v.end)
		}
	}
	if n != len(specs) {
		t.Fatalf("%d states built of %d", n, len(specs))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// TestImageFork: a fork and its image share pages, and a write to either
// leaves the other as it was.
func TestImageFork(t *testing.T) {
	a := newImage(4*pageSize, pages{0: {1}}, pages{1: {2}})
	a.writeAt([]byte{3}, 1, 2*pageSize)
	b := a.fork()
	b.writeAt([]byte{9, 9}, 2, pageSize-1)
	b.writeAt([]byte{8}, 1, 2*pageSize)
	a.writeAt([]byte{7}, 1, 3*pageSize)
	read := func(m *image, off int64) byte {
		p := make([]byte, 1)
		m.readAt(p, off)
		return p[0]
	}
	for _, c := range []struct {
		m    *image
		off  int64
		want byte
	}{
		{a, 0, 1}, {a, pageSize - 1, 0}, {a, pageSize, 2}, {a, 2 * pageSize, 3}, {a, 3 * pageSize, 7},
		{b, 0, 1}, {b, pageSize - 1, 9}, {b, pageSize, 9}, {b, 2 * pageSize, 8}, {b, 3 * pageSize, 0},
	} {
		if got := read(c.m, c.off); got != c.want {
			t.Errorf("byte %d of %p: %d, want %d", c.off, c.m, got, c.want)
		}
	}
}
