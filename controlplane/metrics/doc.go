// Package metrics is skiff's Prometheus registry: the numbers an operator
// reads at GET /metrics to see what the control plane is doing.
//
// A Metrics value owns one prometheus.Registry (never the global default, so
// two servers in one test process do not collide) and the metrics every
// component shares:
//
//   - API server: apiserver_request_total{verb,resource,code},
//     apiserver_request_duration_seconds{verb,resource} and
//     apiserver_watchers{resource} (open watch streams).
//   - Control loops: skiff_reconcile_total{controller,result},
//     skiff_reconcile_duration_seconds{controller} and
//     skiff_workqueue_depth{controller}.
//
// Every method is safe for concurrent use, and safe on a nil *Metrics (it
// then does nothing), so a controller under test needs no registry.
package metrics
