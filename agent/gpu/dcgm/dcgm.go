// Package dcgm is the node's DCGM-exporter-compatible endpoint: what
// NVIDIA's dcgm-exporter serves on :9400/metrics (the series of its
// default counters, named and labelled as it names them), built with
// prometheus/client_golang from the node's usage.Sampler (the driver's
// sensors on real GPUs, the simulator's model on simulated ones).
//
// Invariants: one scrape is one Sample (every series of a scrape is of
// the same instant); a GPU with no holder gives one series per counter,
// a GPU held by several containers (time-slicing, MPS) one per holder
// with the GPU's numbers (dcgm-exporter's pod mapping), and a MIG device
// its own series with GPU_I_PROFILE and GPU_I_ID and its own
// utilisation and memory. Label names are the same on every series of a
// counter (empty values where dcgm-exporter leaves a label out: Prometheus
// reads an empty label as absent).
package dcgm

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/agent/gpu/usage"
)

// DefaultPort is dcgm-exporter's port.
const DefaultPort = 9400

// Counter names (dcgm-exporter's default-counters.csv).
const (
	GPUUtil     = "DCGM_FI_DEV_GPU_UTIL"
	MemCopyUtil = "DCGM_FI_DEV_MEM_COPY_UTIL"
	FBUsed      = "DCGM_FI_DEV_FB_USED"
	FBFree      = "DCGM_FI_DEV_FB_FREE"
	PowerUsage  = "DCGM_FI_DEV_POWER_USAGE"
	GPUTemp     = "DCGM_FI_DEV_GPU_TEMP"
	SMClock     = "DCGM_FI_DEV_SM_CLOCK"
)

// Labels of every series, in dcgm-exporter's order.
var labelNames = []string{"gpu", "UUID", "device", "modelName", "GPU_I_PROFILE", "GPU_I_ID", "Hostname", "container", "namespace", "pod"}

type counter struct {
	desc  *prometheus.Desc
	value func(v values) float64
}

// values are one series' numbers.
type values struct {
	util, memCopy, temp, smClock int
	used, free                   uint64
	power                        float64
}

var counters = []counter{
	{prometheus.NewDesc(SMClock, "SM clock frequency (in MHz).", labelNames, nil), func(v values) float64 { return float64(v.smClock) }},
	{prometheus.NewDesc(GPUTemp, "GPU temperature (in C).", labelNames, nil), func(v values) float64 { return float64(v.temp) }},
	{prometheus.NewDesc(PowerUsage, "Power draw (in W).", labelNames, nil), func(v values) float64 { return v.power }},
	{prometheus.NewDesc(GPUUtil, "GPU utilization (in %).", labelNames, nil), func(v values) float64 { return float64(v.util) }},
	{prometheus.NewDesc(MemCopyUtil, "Memory utilization (in %).", labelNames, nil), func(v values) float64 { return float64(v.memCopy) }},
	{prometheus.NewDesc(FBFree, "Frame buffer memory free (in MB).", labelNames, nil), func(v values) float64 { return float64(v.free) }},
	{prometheus.NewDesc(FBUsed, "Frame buffer memory used (in MB).", labelNames, nil), func(v values) float64 { return float64(v.used) }},
}

var scrapeError = prometheus.NewDesc("dcgm_exporter_scrape_error", "The GPUs could not be read.", nil, nil)

// Collector is a prometheus.Collector of a node's GPUs.
type Collector struct {
	sampler  usage.Sampler
	hostname string
	timeout  time.Duration
}

// NewCollector collects from sampler; hostname is the Hostname label (the
// node's name, as dcgm-exporter in a DaemonSet reports its pod's node).
func NewCollector(sampler usage.Sampler, hostname string) *Collector {
	return &Collector{sampler: sampler, hostname: hostname, timeout: 5 * time.Second}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, k := range counters {
		ch <- k.desc
	}
	ch <- scrapeError
}

// Collect implements prometheus.Collector: one Sample, every series.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	s, err := c.sampler.Sample(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(scrapeError, err)
		return
	}
	for _, g := range s.GPUs {
		c.collectGPU(ch, g)
	}
}

func (c *Collector) collectGPU(ch chan<- prometheus.Metric, g usage.GPUSample) {
	idx := strconv.Itoa(g.Index)
	dev := "nvidia" + idx
	gv := values{util: g.UtilPercent, memCopy: g.MemCopyUtilPercent, temp: g.TemperatureC, smClock: g.SMClockMHz,
		used: g.MemoryUsedMiB, free: g.MemoryFreeMiB, power: g.PowerW}
	var migs []usage.DeviceSample
	var holders []usage.Holder
	for _, d := range g.Devices {
		if d.Sharing == gpu.SharingMIG && d.MIG != nil {
			migs = append(migs, d)
		} else if d.Holder != nil && !containsHolder(holders, *d.Holder) {
			holders = append(holders, *d.Holder)
		}
	}
	emit := func(v values, profile, gi string, h *usage.Holder) {
		var ctr, ns, pod string
		if h != nil {
			ctr, ns, pod = h.Container, h.Namespace, h.Pod
		}
		for _, k := range counters {
			ch <- prometheus.MustNewConstMetric(k.desc, prometheus.GaugeValue, k.value(v), idx, g.UUID, dev, g.Name, profile, gi, c.hostname, ctr, ns, pod)
		}
	}
	switch {
	case len(migs) == 0 && len(holders) == 0:
		emit(gv, "", "", nil)
	default:
		for i := range holders {
			emit(gv, "", "", &holders[i])
		}
		if len(holders) == 0 && len(migs) < len(g.Devices) {
			emit(gv, "", "", nil)
		}
	}
	for _, d := range migs {
		mv := values{util: d.UtilPercent, memCopy: gv.memCopy * d.UtilPercent / max(g.UtilPercent, 1), temp: gv.temp, smClock: gv.smClock,
			used: d.MemoryUsedMiB, free: d.MemoryFreeMiB, power: gv.power}
		if g.UtilPercent == 0 {
			mv.memCopy = 0
		}
		emit(mv, d.MIG.Profile, strconv.Itoa(d.MIG.GI), d.Holder)
	}
}

func containsHolder(hs []usage.Holder, h usage.Holder) bool {
	for _, x := range hs {
		if x == h {
			return true
		}
	}
	return false
}

// Handler serves the collector's series as Prometheus text at any path
// (the exporter's server routes /metrics to it).
func Handler(c *Collector) http.Handler {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Server is the exporter's HTTP server: /metrics, plain HTTP as
// dcgm-exporter's, on its own listener.
func Server(c *Collector) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", Handler(c))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "OK") })
	return &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
}
