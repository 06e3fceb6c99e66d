package main

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// summary reads result lines (tag, mode, ops/s, CPU µs/op, and the
// round, which cpu-per-io.sh appends) and prints, per mode and tag, the
// medians and their ratios to fio's at QD16 ("fio"): reads/s and CPU per
// read; and reads/s over fio's jobs at QD1 ("fiojobs"), as many as dio's
// goroutines, where measured. A ratio is taken in each round, against
// the mean of that round's fio runs (one beside each build: fio is the
// same program whatever the tag), and the median of the rounds' ratios
// is printed with their range: on a shared machine fio's own rate drifts
// from round to round, and a ratio within a round cancels the drift.
// Lines without a round count as one round each. Where a mode ran on
// several builds, the last column is each build's CPU per read over the
// work tree's ("tree") in the same round, median and range: the cost of
// a change in paired runs (NOSTATS=1 in cpu-per-io.sh: of the
// statistics; a REV of the tree itself gives the runs' own noise).
func summary(r io.Reader, w io.Writer) {
	type key struct{ mode, tag string }
	type run struct {
		round      string
		ops, cpuUS float64
	}
	runs := map[key][]run{}
	var keys []key
	ref := map[string]map[string][]run{} // fio mode → round → runs
	tree := map[string]map[string]run{}  // mode → round → the tree's run
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) < 4 {
			continue
		}
		o, err1 := strconv.ParseFloat(f[2], 64)
		c, err2 := strconv.ParseFloat(f[3], 64)
		if err1 != nil || err2 != nil {
			continue
		}
		n++
		rn := run{round: "line" + strconv.Itoa(n), ops: o, cpuUS: c}
		if len(f) > 4 {
			rn.round = f[4]
		}
		k := key{f[1], f[0]}
		if _, ok := runs[k]; !ok {
			keys = append(keys, k)
		}
		runs[k] = append(runs[k], rn)
		if f[0] == "tree" {
			if tree[f[1]] == nil {
				tree[f[1]] = map[string]run{}
			}
			tree[f[1]][rn.round] = rn
		}
		if f[1] == "fio" || f[1] == "fiojobs" || f[1] == "fioappend" {
			if ref[f[1]] == nil {
				ref[f[1]] = map[string][]run{}
			}
			ref[f[1]][rn.round] = append(ref[f[1]][rn.round], rn)
		}
	}
	med := func(v []float64) float64 {
		v = slices.Clone(v)
		slices.Sort(v)
		return v[len(v)/2]
	}
	// ratio returns the median, minimum and maximum over rounds of
	// rs' ops (or CPU) over the mean of the same round's runs of fio
	// mode m, and false when no round has both.
	ratio := func(rs []run, m string, cpu bool) (float64, float64, float64, bool) {
		var v []float64
		for _, x := range rs {
			fr := ref[m][x.round]
			if len(fr) == 0 {
				continue
			}
			var sum float64
			for _, y := range fr {
				if cpu {
					sum += y.cpuUS
				} else {
					sum += y.ops
				}
			}
			mean := sum / float64(len(fr))
			if cpu {
				v = append(v, x.cpuUS/mean)
			} else {
				v = append(v, x.ops/mean)
			}
		}
		if len(v) == 0 {
			return 0, 0, 0, false
		}
		return med(v), slices.Min(v), slices.Max(v), true
	}
	slices.SortFunc(keys, func(a, b key) int { return strings.Compare(a.mode+"\x00"+a.tag, b.mode+"\x00"+b.tag) })
	fmt.Fprintf(w, "%-11s %-9s %4s %9s %9s %17s %17s %17s\n", "mode", "tag", "runs", "ops/s", "CPU µs/op", "× fio (range)", "× fio CPU", "× jobs")
	for _, k := range keys {
		rs := runs[k]
		var ops, cpu []float64
		for _, x := range rs {
			ops, cpu = append(ops, x.ops), append(cpu, x.cpuUS)
		}
		cell := func(m string, c bool) string {
			r, lo, hi, ok := ratio(rs, m, c)
			if !ok {
				return ""
			}
			return fmt.Sprintf("%5.2f (%.2f-%.2f)", r, lo, hi)
		}
		var cells []string
		switch {
		case k.mode == "fio" || k.mode == "fiojobs" || k.mode == "fioappend":
			if k.mode == "fiojobs" {
				cells = []string{cell("fio", false), cell("fio", true)}
			}
		case strings.Contains(k.mode, "append"):
			cells = []string{cell("fioappend", false), cell("fioappend", true)}
		default:
			cells = []string{cell("fio", false), cell("fio", true)}
			if k.mode == "queue" || k.mode == "readblob" || k.mode == "readat" || k.mode == "pread" {
				cells = append(cells, cell("fiojobs", false))
			}
		}
		line := fmt.Sprintf("%-11s %-9s %4d %9.0f %9.2f", k.mode, k.tag, len(rs), med(ops), med(cpu))
		for _, c := range cells {
			line += fmt.Sprintf(" %17s", c)
		}
		var vs []float64 // CPU per read over the tree's, round by round
		for _, x := range rs {
			if t, ok := tree[k.mode][x.round]; ok && k.tag != "tree" && t.cpuUS > 0 {
				vs = append(vs, x.cpuUS/t.cpuUS)
			}
		}
		if len(vs) > 0 {
			line += fmt.Sprintf("  CPU × tree %.3f (%.2f-%.2f)", med(vs), slices.Min(vs), slices.Max(vs))
		}
		fmt.Fprintln(w, line)
	}
}
