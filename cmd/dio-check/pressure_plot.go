package main

import (
	"fmt"
	"github.com/dio-storage/dio/internal/benchkit"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// plotPressure draws, per row, the fraction of the co-tenant's reads
// slower than each latency, both axes logarithmic: the tail a buffered
// writer gives its neighbour shows as a line far to the right.
func plotPressure(c pressureConfig, rows []PressureRow, details []rowDetail) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("co-tenant 4 KiB random reads of a warm %s file, %s memory cgroup", sizeName(c.hot), sizeName(c.memory))
	p.X.Label.Text = "read latency (µs)"
	p.Y.Label.Text = "fraction of reads slower"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = latencyTicks{}, fractionTicks{}
	p.Legend.Top = true // the lines fall from the top left: the top right is empty
	p.Add(plotter.NewGrid())
	for i, r := range rows {
		xys := ccdf(details[i].Hist)
		if len(xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.5)
		l.Dashes = plotutil.Dashes(i)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s: p99 %s, %s reads/s", r.Engine, usName(r.CotenantP99Us), countName(r.CotenantReadsS)), l)
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, c.plot)
}

// ccdf turns histogram points into (latency µs, fraction of samples above
// it), leaving out the last point, whose fraction is 0 and has no place
// on a log axis.
func ccdf(ps []benchkit.HistPoint) plotter.XYs {
	var total uint64
	for _, p := range ps {
		total += p.Count
	}
	var xys plotter.XYs
	above := total
	for _, p := range ps {
		above -= p.Count
		if above == 0 {
			break
		}
		xys = append(xys, plotter.XY{X: max(float64(p.HighNs)/1e3, 0.001), Y: float64(above) / float64(total)})
	}
	return xys
}

// latencyTicks marks each power of ten of microseconds as a duration.
type latencyTicks struct{}

func (latencyTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for v := 0.01; v <= hi*10; v *= 10 {
		if v >= lo/10 {
			ts = append(ts, plot.Tick{Value: v, Label: usName(v)})
		}
	}
	return ts
}

// fractionTicks marks each power of ten as a percentage.
type fractionTicks struct{}

func (fractionTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for k := 0; k <= 9; k++ {
		v := math.Pow10(-k)
		if v < lo/10 || v > hi*10 {
			continue
		}
		label := "0." + strings.Repeat("0", max(k-3, 0)) + "1%"
		if k <= 2 {
			label = strconv.Itoa(int(math.Pow10(2-k))) + "%"
		}
		ts = append(ts, plot.Tick{Value: v, Label: label})
	}
	return ts
}
