package main

import (
	"fmt"

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
	p.Title.Text = fmt.Sprintf("co-tenant 4 KiB random reads of a warm %s file, %s memory cgroup", sizeName(int(c.hot)), sizeName(int(c.memory)))
	p.X.Label.Text = "read latency (µs)"
	p.Y.Label.Text = "fraction of reads slower"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Legend.Top = true
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
		p.Legend.Add(fmt.Sprintf("%s: p99 %s", r.Engine, usName(r.CotenantP99Us)), l)
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, c.plot)
}

// ccdf turns histogram points into (latency µs, fraction of samples above
// it), leaving out the last point, whose fraction is 0 and has no place
// on a log axis.
func ccdf(ps []histPoint) plotter.XYs {
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
