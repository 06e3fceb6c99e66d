package main

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// summary reads result lines (tag, mode, ops/s, CPU µs/op) and prints,
// per mode and tag, the medians and their ratios to fio's at QD16 ("fio")
// of the same tag: reads/s and CPU per read; and reads/s over fio's
// jobs at QD1 ("fiojobs"), as many as dio's goroutines, where measured.
func summary(r io.Reader, w io.Writer) {
	type key struct{ mode, tag string }
	ops, cpu := map[key][]float64{}, map[key][]float64{}
	var keys []key
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 4 {
			continue
		}
		o, err1 := strconv.ParseFloat(f[2], 64)
		c, err2 := strconv.ParseFloat(f[3], 64)
		if err1 != nil || err2 != nil {
			continue
		}
		k := key{f[1], f[0]}
		if _, ok := ops[k]; !ok {
			keys = append(keys, k)
		}
		ops[k], cpu[k] = append(ops[k], o), append(cpu[k], c)
	}
	med := func(v []float64) float64 {
		v = slices.Clone(v)
		slices.Sort(v)
		return v[len(v)/2]
	}
	slices.SortFunc(keys, func(a, b key) int { return strings.Compare(a.mode+"\x00"+a.tag, b.mode+"\x00"+b.tag) })
	fmt.Fprintf(w, "%-10s %-10s %5s %10s %10s %8s %8s %8s\n", "mode", "tag", "runs", "ops/s", "CPU µs/op", "× fio", "× fio CPU", "× jobs")
	for _, k := range keys {
		o, c := med(ops[k]), med(cpu[k])
		ratios := ""
		if f := (key{"fio", k.tag}); ops[f] != nil && !strings.Contains(k.mode, "append") {
			ratios = fmt.Sprintf("%8.2f %8.2f", o/med(ops[f]), c/med(cpu[f]))
		}
		if f := (key{"fioappend", k.tag}); k.mode == "append" && ops[f] != nil {
			ratios = fmt.Sprintf("%8.2f %8.2f", o/med(ops[f]), c/med(cpu[f]))
		}
		if f := (key{"fiojobs", k.tag}); (k.mode == "queue" || k.mode == "readblob" || k.mode == "pread") && ops[f] != nil {
			ratios += fmt.Sprintf(" %8.2f", o/med(ops[f]))
		}
		fmt.Fprintf(w, "%-10s %-10s %5d %10.0f %10.2f %s\n", k.mode, k.tag, len(ops[k]), o, c, ratios)
	}
}
