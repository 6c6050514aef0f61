package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics holds skiff's metrics and the registry that serves them.
type Metrics struct {
	reg *prometheus.Registry

	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	watchers        *prometheus.GaugeVec

	reconciles        *prometheus.CounterVec
	reconcileDuration *prometheus.HistogramVec
	queueDepth        *prometheus.GaugeVec
}

// latencyBuckets span 100µs to ~3s: a store write with group commit takes
// about a millisecond, a slow reconcile a second.
var latencyBuckets = prometheus.ExponentialBuckets(0.0001, 2.5, 12)

// New returns a Metrics with its own registry, which also carries the Go
// runtime and process collectors.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_request_total",
			Help: "API requests by verb, resource and HTTP status code.",
		}, []string{"verb", "resource", "code"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_request_duration_seconds",
			Help:    "API request latency by verb and resource (watches excluded).",
			Buckets: latencyBuckets,
		}, []string{"verb", "resource"}),
		watchers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_watchers",
			Help: "Open watch streams by resource.",
		}, []string{"resource"}),
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "skiff_reconcile_total",
			Help: "Reconcile calls by controller and result (success or error).",
		}, []string{"controller", "result"}),
		reconcileDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "skiff_reconcile_duration_seconds",
			Help:    "Reconcile latency by controller.",
			Buckets: latencyBuckets,
		}, []string{"controller"}),
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "skiff_workqueue_depth",
			Help: "Keys waiting in a controller's work queue.",
		}, []string{"controller"}),
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.requestDuration, m.watchers,
		m.reconciles, m.reconcileDuration, m.queueDepth,
	)
	return m
}

// Registry returns the underlying registry, to register more collectors.
func (m *Metrics) Registry() *prometheus.Registry {
	if m == nil {
		return nil
	}
	return m.reg
}

// Register adds collectors (a store's statistics, a component's own
// metrics). It fails when a metric of the same name is already registered.
func (m *Metrics) Register(cs ...prometheus.Collector) error {
	if m == nil {
		return nil
	}
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// ObserveRequest records one finished API request. Watches are counted but
// their duration (the life of the stream) is not put in the histogram.
func (m *Metrics) ObserveRequest(verb, resource string, code int, d time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(verb, resource, strconv.Itoa(code)).Inc()
	if verb != "watch" {
		m.requestDuration.WithLabelValues(verb, resource).Observe(d.Seconds())
	}
}

// AddWatchers changes the number of open watch streams of a resource by
// delta (+1 when one opens, -1 when it ends).
func (m *Metrics) AddWatchers(resource string, delta int) {
	if m == nil {
		return
	}
	m.watchers.WithLabelValues(resource).Add(float64(delta))
}

// ObserveReconcile records one Reconcile call of a controller: its duration
// and whether it returned an error.
func (m *Metrics) ObserveReconcile(controller string, d time.Duration, err error) {
	if m == nil {
		return
	}
	result := "success"
	if err != nil {
		result = "error"
	}
	m.reconciles.WithLabelValues(controller, result).Inc()
	m.reconcileDuration.WithLabelValues(controller).Observe(d.Seconds())
}

// SetQueueDepth records how many keys wait in a controller's queue.
func (m *Metrics) SetQueueDepth(controller string, n int) {
	if m == nil {
		return
	}
	m.queueDepth.WithLabelValues(controller).Set(float64(n))
}
