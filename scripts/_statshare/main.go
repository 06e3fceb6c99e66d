// Command _statshare reads `perf script` output of a Go program recorded
// with call graphs (perf record -g) and prints the share of the samples
// spent in dio's statistics: a sample counts when any frame of its stack
// lies in a source file the -files pattern matches (direct/stats_*.go by
// default), inlined code included, since the binary's line table gives
// the position inside an inlined function. scripts/stats-share.sh runs
// it.
package main

import (
	"bufio"
	"cmp"
	"debug/elf"
	"debug/gosym"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func main() {
	bin := flag.String("bin", "", "the recorded binary")
	files := flag.String("files", `/direct/stats_[a-z_]+\.go$`, "source files that count")
	top := flag.Int("top", 6, "lines to list")
	flag.Parse()
	log.SetFlags(0)
	tab, base, err := lineTable(*bin)
	if err != nil {
		log.Fatalf("_statshare: %v", err)
	}
	s, err := share(os.Stdin, filepath.Base(*bin), tab, base, regexp.MustCompile(*files))
	if err != nil {
		log.Fatalf("_statshare: %v", err)
	}
	fmt.Printf("samples %d, in statistics %d: %.2f%%\n", s.samples, s.hits, 100*float64(s.hits)/float64(max(s.samples, 1)))
	lines := slices.SortedFunc(maps.Keys(s.byLine), func(a, b string) int { return cmp.Compare(s.byLine[b], s.byLine[a]) })
	for _, l := range lines[:min(*top, len(lines))] {
		fmt.Printf("  %6d  %s\n", s.byLine[l], l)
	}
}

// lineTable reads bin's Go line table and the offset perf's addresses
// (file offsets) need to become program counters.
func lineTable(bin string) (*gosym.Table, uint64, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	pcln, text := f.Section(".gopclntab"), f.Section(".text")
	if pcln == nil || text == nil {
		return nil, 0, fmt.Errorf("%s: no Go line table", bin)
	}
	data, err := pcln.Data()
	if err != nil {
		return nil, 0, err
	}
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	if err != nil {
		return nil, 0, err
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			return tab, p.Vaddr - p.Off, nil
		}
	}
	return nil, 0, fmt.Errorf("%s: no executable segment", bin)
}

type tally struct {
	samples, hits int
	byLine        map[string]int
}

// share classifies the samples of a perf script listing.
func share(r io.Reader, name string, tab *gosym.Table, base uint64, files *regexp.Regexp) (tally, error) {
	t := tally{byLine: map[string]int{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	in, hit := false, ""
	end := func() {
		if in {
			t.samples++
			if hit != "" {
				t.hits++
				t.byLine[hit]++
			}
		}
		in, hit = false, ""
	}
	suffix := "/" + name + ")"
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || (line[0] != ' ' && line[0] != '\t') {
			end()
			in = strings.TrimSpace(line) != ""
			continue
		}
		f := strings.Fields(line)
		if hit != "" || len(f) < 3 || !strings.HasSuffix(f[len(f)-1], suffix) {
			continue
		}
		off, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil {
			continue
		}
		if file, ln, _ := tab.PCToLine(off + base); files.MatchString(file) {
			hit = fmt.Sprintf("%s:%d", filepath.Base(file), ln)
		}
	}
	end()
	return t, sc.Err()
}
