package promdio_test

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dio-storage/dio/examples/promdio"
)

// Example registers dio's statistics beside a service's own metrics and
// serves them on /metrics.
func Example() {
	reg := prometheus.NewRegistry()
	reg.MustRegister(promdio.NewCollector())
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// http.ListenAndServe(":9090", nil)
}
