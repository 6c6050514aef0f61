package dcgm

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/agent/gpu/usage"
)

func eightGPUs() *usage.Sample {
	s := &usage.Sample{}
	for i := range 8 {
		uuid := fmt.Sprintf("GPU-%08d", i)
		s.GPUs = append(s.GPUs, usage.GPUSample{Index: i, UUID: uuid, Name: "NVIDIA H100 80GB HBM3", UtilPercent: 90, MemCopyUtilPercent: 27,
			MemoryUsedMiB: 1024, MemoryFreeMiB: 80000, PowerW: 600, TemperatureC: 70, SMClockMHz: 1980,
			Devices: []usage.DeviceSample{{SubDevice: gpu.SubDevice{ID: uuid, ParentUUID: uuid}, UtilPercent: 90,
				Holder: &usage.Holder{Namespace: "default", Pod: fmt.Sprintf("train-%d", i), Container: "c"}}}})
	}
	return s
}

func benchScrape(b *testing.B, h http.Handler) {
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Code)
		}
		_, _ = io.Copy(io.Discard, rec.Body)
	}
}

// BenchmarkScrape8GPUs is one scrape of a node with 8 held GPUs (the
// collector and the exposition; the Sample is given), against
// BenchmarkScrapeProcessMetrics in the same run: docs/performance.md.
func BenchmarkScrape8GPUs(b *testing.B) {
	benchScrape(b, Handler(NewCollector(fixedSampler{s: eightGPUs()}, "node-1")))
}

// BenchmarkScrapeProcessMetrics is the baseline: a scrape of a skiff
// process's own /metrics collectors (Go runtime and process), as
// controlplane/metrics registers them.
func BenchmarkScrapeProcessMetrics(b *testing.B) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	benchScrape(b, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
}
