package promdio_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/dio-storage/dio/direct"
	"github.com/dio-storage/dio/examples/promdio"
)

// value returns the metric of family name whose labels are all of want.
func value(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := want[l.GetName()]; ok && v != l.GetValue() {
					continue next
				}
			}
			return m
		}
	}
	return nil
}

// TestCollector writes through a page-cache File and finds the writes,
// their bytes and their latencies in the scrape.
func TestCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(promdio.NewCollector())
	labels := map[string]string{"op": "write", "path": "std-fs"}
	count := func() float64 {
		if m := value(t, reg, "dio_io_operations_total", labels); m != nil {
			return m.GetCounter().GetValue()
		}
		return 0
	}
	before := count()

	o, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	f := direct.Buffered(o)
	defer f.Close()
	for i := range 5 {
		if _, err := f.WriteAt(make([]byte, 1000), int64(i*1000)); err != nil {
			t.Fatal(err)
		}
	}
	if got := count() - before; got != 5 {
		t.Errorf("writes: %v, want 5", got)
	}
	bytes := value(t, reg, "dio_io_device_bytes_total", labels).GetCounter().GetValue()
	if bytes < 5000 {
		t.Errorf("device bytes %v, want at least 5000", bytes)
	}
	h := value(t, reg, "dio_io_latency_seconds", labels).GetHistogram()
	if float64(h.GetSampleCount()) != count() {
		t.Errorf("latency count %d, operations %v", h.GetSampleCount(), count())
	}
	if n := len(h.GetBucket()); n != len(promdio.LatencyBounds) {
		t.Errorf("%d buckets, want %d", n, len(promdio.LatencyBounds))
	}

	problems, err := testutil.CollectAndLint(promdio.NewCollector())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// TestBuckets checks that the exported buckets are cumulative and exact
// at their bounds.
func TestBuckets(t *testing.T) {
	var h direct.Histogram
	for i := range direct.HistogramBuckets {
		h.Counts[i] = 1
	}
	m := prometheus.MustNewConstHistogram(prometheus.NewDesc("x", "x", nil, nil), h.Count(), 0, promdio.Buckets(h))
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	for _, b := range out.GetHistogram().GetBucket() {
		var want uint64
		for i := range direct.HistogramBuckets {
			if _, hi := direct.BucketBounds(i); hi.Seconds() <= b.GetUpperBound() {
				want++
			}
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("le %g: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
}

// TestHandler serves the registry over HTTP as a service would.
func TestHandler(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(promdio.NewCollector())
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), "dio_files_opened_total") {
		t.Errorf("no dio_files_opened_total in:\n%s", b)
	}
}
