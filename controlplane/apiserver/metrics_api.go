package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"skiff.dev/skiff/api"
)

// The resource metrics API (metrics.k8s.io/v1beta1), what `kubectl top`
// reads, served as metrics-server serves it but inside the API server:
//
//	GET /apis/metrics.k8s.io/v1beta1/nodes[/NAME]
//	GET /apis/metrics.k8s.io/v1beta1/pods                       (all namespaces)
//	GET /apis/metrics.k8s.io/v1beta1/namespaces/NS/pods[/NAME]
//
// Nothing is stored. Each request lists the nodes (or pods) it names from
// the registry, honouring labelSelector (and fieldSelector for pods), and
// asks the agents of the nodes concerned for their Summary (GET
// /stats/summary, agent/stats.go) through the nodes/proxy path
// (proxy_node.go: the same TLS and client certificate as logs and exec),
// at most metricsFetchConcurrency at a time, each within
// metricsFetchTimeout. A node that does not answer, or answers without a
// CPU rate yet, is left out, as metrics-server leaves it out; a pod whose
// containers have no rate yet too. The figures: usageNanoCores (a rate
// the agent computed from two samples of the cgroup's cumulative CPU
// time) and the memory working set; window is the agent's sampling
// interval as metrics-server reports its own.

const (
	metricsGroup   = "metrics.k8s.io"
	metricsVersion = "v1beta1"
	metricsPrefix  = "/apis/" + metricsGroup

	// metricsFetchConcurrency bounds the agents asked at once.
	metricsFetchConcurrency = 16
	// metricsFetchTimeout bounds one agent's answer (kubectl waits for
	// the slowest).
	metricsFetchTimeout = 5 * time.Second
	// metricsMaxSummaryBytes bounds one agent's answer.
	metricsMaxSummaryBytes = 16 << 20
	// metricsWindow is what NodeMetrics.window reports: the agent's
	// sampling interval (agent/stats.go statsInterval).
	metricsWindow = 10 * time.Second
)

// Kinds for the error messages only (nodemetrics.metrics.k8s.io "x" not found).
var (
	nodeMetricsKind = &api.Kind{Kind: "NodeMetrics", Group: metricsGroup, Version: metricsVersion, Resource: "nodemetrics"}
	podMetricsKind  = &api.Kind{Kind: "PodMetrics", Group: metricsGroup, Version: metricsVersion, Resource: "podmetrics"}
)

// metricsAPIGroup is the group as /apis lists it (discovery.go).
func metricsAPIGroup() apiGroup {
	gv := groupVersion{GroupVersion: api.MetricsGroupVersion, Version: metricsVersion}
	return apiGroup{Name: metricsGroup, Versions: []groupVersion{gv}, PreferredVersion: gv}
}

// serveMetricsAPI answers the paths under /apis/metrics.k8s.io; it reports
// false for any other path.
func (s *Server) serveMetricsAPI(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path != metricsPrefix && !strings.HasPrefix(r.URL.Path, metricsPrefix+"/") {
		return false
	}
	parts := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, metricsPrefix), "/"), "/")
	if parts[0] == "" {
		parts = nil
	}
	if r.Method != http.MethodGet {
		writeError(w, api.NewStatusError(http.StatusMethodNotAllowed, api.ReasonMethodNotAllowd,
			"the server does not allow this method on the requested resource"))
		return true
	}
	switch {
	case len(parts) == 0:
		writeAPIGroup(w, metricsAPIGroup())
		return true
	case parts[0] != metricsVersion:
		writeError(w, notFoundPath())
		return true
	case len(parts) == 1:
		verbs := []string{"get", "list"}
		writeJSON(w, http.StatusOK, map[string]any{"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": api.MetricsGroupVersion,
			"resources": []apiResource{
				{Name: "nodes", SingularName: "", Namespaced: false, Kind: "NodeMetrics", Verbs: verbs},
				{Name: "pods", SingularName: "", Namespaced: true, Kind: "PodMetrics", Verbs: verbs},
			}})
		return true
	}
	q := r.URL.Query()
	if v := q.Get("watch"); v == "1" || v == "true" {
		writeError(w, api.NewStatusError(http.StatusMethodNotAllowed, api.ReasonMethodNotAllowd,
			"watch is not supported on "+metricsGroup+" (metrics are read, not stored)"))
		return true
	}
	opts := api.ListOptions{LabelSelector: q.Get("labelSelector"), FieldSelector: q.Get("fieldSelector")}
	rest := parts[1:]
	switch {
	case len(rest) == 1 && rest[0] == "nodes":
		s.serveNodeMetrics(w, r, "", opts)
	case len(rest) == 2 && rest[0] == "nodes":
		s.serveNodeMetrics(w, r, rest[1], opts)
	case len(rest) == 1 && rest[0] == "pods":
		s.servePodMetrics(w, r, "", "", opts)
	case len(rest) == 3 && rest[0] == "namespaces" && rest[2] == "pods":
		s.servePodMetrics(w, r, rest[1], "", opts)
	case len(rest) == 4 && rest[0] == "namespaces" && rest[2] == "pods":
		s.servePodMetrics(w, r, rest[1], rest[3], opts)
	default:
		writeError(w, notFoundPath())
	}
	return true
}

// serveNodeMetrics answers nodes (name "") or nodes/NAME.
func (s *Server) serveNodeMetrics(w http.ResponseWriter, r *http.Request, name string, opts api.ListOptions) {
	ctx := r.Context()
	var nodes []*api.Node
	if name != "" {
		o, err := s.reg.Get(ctx, nodeKind, "", name)
		if api.IsNotFound(err) {
			writeError(w, api.NewNotFound(nodeMetricsKind, name))
			return
		}
		if err != nil {
			writeError(w, err)
			return
		}
		nodes = append(nodes, o.(*api.Node))
	} else {
		objs, _, err := s.reg.List(ctx, nodeKind, "", opts)
		if err != nil {
			writeError(w, err)
			return
		}
		for _, o := range objs {
			nodes = append(nodes, o.(*api.Node))
		}
	}
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	summaries := s.fetchSummaries(ctx, names)
	items := []api.NodeMetrics{}
	for _, n := range nodes {
		sum, ok := summaries[n.Name]
		if !ok {
			continue
		}
		if m, ok := nodeMetrics(n, sum.Node); ok {
			items = append(items, m)
		}
	}
	if name != "" {
		if len(items) == 0 {
			writeError(w, api.NewNotFound(nodeMetricsKind, name))
			return
		}
		writeJSON(w, http.StatusOK, items[0])
		return
	}
	writeJSON(w, http.StatusOK, api.NodeMetricsList{TypeMeta: api.TypeMeta{APIVersion: api.MetricsGroupVersion, Kind: "NodeMetricsList"}, Items: items})
}

// servePodMetrics answers pods of namespace ("" = all) or one pod.
func (s *Server) servePodMetrics(w http.ResponseWriter, r *http.Request, namespace, name string, opts api.ListOptions) {
	ctx := r.Context()
	var pods []*api.Pod
	if name != "" {
		o, err := s.reg.Get(ctx, podKind, namespace, name)
		if api.IsNotFound(err) {
			writeError(w, api.NewNotFound(podMetricsKind, namespace+"/"+name))
			return
		}
		if err != nil {
			writeError(w, err)
			return
		}
		pods = append(pods, o.(*api.Pod))
	} else {
		var err error
		if pods, err = s.podsIn(ctx, namespace, opts); err != nil {
			writeError(w, err)
			return
		}
	}
	nodes := nodesOf(pods)
	summaries := s.fetchSummaries(ctx, nodes)
	byUID := map[string]statsapi.PodStats{}
	for _, sum := range summaries {
		for _, ps := range sum.Pods {
			byUID[ps.PodRef.UID] = ps
		}
	}
	items := []api.PodMetrics{}
	for _, p := range pods {
		ps, ok := byUID[p.UID]
		if !ok || ps.PodRef.Name != p.Name || ps.PodRef.Namespace != p.Namespace {
			continue
		}
		if m, ok := podMetrics(p, ps); ok {
			items = append(items, m)
		}
	}
	if name != "" {
		if len(items) == 0 {
			writeError(w, api.NewNotFound(podMetricsKind, namespace+"/"+name))
			return
		}
		writeJSON(w, http.StatusOK, items[0])
		return
	}
	writeJSON(w, http.StatusOK, api.PodMetricsList{TypeMeta: api.TypeMeta{APIVersion: api.MetricsGroupVersion, Kind: "PodMetricsList"}, Items: items})
}

// nodeMetrics converts a node's Summary figures; ok is false without a
// CPU rate or a working set (a node just started, or one that does not
// measure).
func nodeMetrics(n *api.Node, ns statsapi.NodeStats) (api.NodeMetrics, bool) {
	if ns.CPU == nil || ns.CPU.UsageNanoCores == nil || ns.Memory == nil || ns.Memory.WorkingSetBytes == nil {
		return api.NodeMetrics{}, false
	}
	m := api.NodeMetrics{
		TypeMeta:   api.TypeMeta{APIVersion: api.MetricsGroupVersion, Kind: "NodeMetrics"},
		ObjectMeta: api.ObjectMeta{Name: n.Name, Labels: n.Labels, CreationTimestamp: api.Now()},
		Timestamp:  api.NewTime(ns.CPU.Time.Time),
		Window:     metav1.Duration{Duration: metricsWindow},
		Usage:      usage(*ns.CPU.UsageNanoCores, *ns.Memory.WorkingSetBytes),
	}
	return m, true
}

// podMetrics converts a pod's Summary figures; ok is false when a
// container lacks a CPU rate or a working set, as metrics-server drops
// such pods.
func podMetrics(p *api.Pod, ps statsapi.PodStats) (api.PodMetrics, bool) {
	m := api.PodMetrics{
		TypeMeta:   api.TypeMeta{APIVersion: api.MetricsGroupVersion, Kind: "PodMetrics"},
		ObjectMeta: api.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels, CreationTimestamp: api.Now()},
		Window:     metav1.Duration{Duration: metricsWindow},
		Containers: []api.ContainerMetrics{},
	}
	if len(ps.Containers) == 0 {
		return m, false
	}
	for _, c := range ps.Containers {
		if c.CPU == nil || c.CPU.UsageNanoCores == nil || c.Memory == nil || c.Memory.WorkingSetBytes == nil {
			return m, false
		}
		if t := c.CPU.Time.Time; t.After(m.Timestamp.Time) {
			m.Timestamp = api.NewTime(t)
		}
		m.Containers = append(m.Containers, api.ContainerMetrics{Name: c.Name, Usage: usage(*c.CPU.UsageNanoCores, *c.Memory.WorkingSetBytes)})
	}
	return m, true
}

// usage is cpu in nanocores and memory in bytes, as metrics-server
// writes them ("12345678n", "52428Ki").
func usage(nanoCores, workingSet uint64) api.ResourceList {
	return api.ResourceList{
		api.ResourceCPU:    *resource.NewScaledQuantity(int64(nanoCores), resource.Nano),
		api.ResourceMemory: *resource.NewQuantity(int64(workingSet), resource.BinarySI),
	}
}

// fetchSummaries asks the agents of nodes for their Summary, at most
// metricsFetchConcurrency at once, each within metricsFetchTimeout. Nodes
// that fail are left out (and logged at debug level).
func (s *Server) fetchSummaries(ctx context.Context, nodes []string) map[string]statsapi.Summary {
	out := map[string]statsapi.Summary{}
	fromNodes(s, nodes, "resource metrics", func(n string) (statsapi.Summary, error) { return s.fetchSummary(ctx, n) },
		func(n string, sum statsapi.Summary) { out[n] = sum })
	return out
}

// fromNodes calls fetch for each node, at most metricsFetchConcurrency at
// once, and keep (one call at a time) with each answer. A node whose fetch
// fails is left out of what, logged at debug level. The metrics APIs
// (resource, custom) read their nodes through it.
func fromNodes[T any](s *Server, nodes []string, what string, fetch func(node string) (T, error), keep func(node string, v T)) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, metricsFetchConcurrency)
	for _, n := range nodes {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			v, err := fetch(n)
			if err != nil {
				s.log.Debug("node left out of "+what, "node", n, "err", err)
				return
			}
			mu.Lock()
			keep(n, v)
			mu.Unlock()
		})
	}
	wg.Wait()
}

// fetchSummary asks one node's agent through the nodes/proxy path.
func (s *Server) fetchSummary(ctx context.Context, node string) (statsapi.Summary, error) {
	ctx, cancel := context.WithTimeout(ctx, metricsFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, nodeProxyPrefix+node+"/proxy/stats/summary", nil)
	if err != nil {
		return statsapi.Summary{}, err
	}
	rec := &limitedRecorder{header: http.Header{}, code: http.StatusOK, limit: metricsMaxSummaryBytes}
	s.proxy.serveNode(rec, req, node, "/stats/summary")
	if rec.code != http.StatusOK {
		return statsapi.Summary{}, fmt.Errorf("stats summary of node %s: %d %s", node, rec.code, bytes.TrimSpace(rec.body.Bytes()))
	}
	if rec.over {
		return statsapi.Summary{}, fmt.Errorf("stats summary of node %s: larger than %d bytes", node, metricsMaxSummaryBytes)
	}
	var sum statsapi.Summary
	if err := json.Unmarshal(rec.body.Bytes(), &sum); err != nil {
		return statsapi.Summary{}, fmt.Errorf("stats summary of node %s: %w", node, err)
	}
	return sum, nil
}

// limitedRecorder is the ResponseWriter a proxied request to an agent
// writes into: it keeps the status and up to limit bytes of body.
type limitedRecorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
	limit  int
	over   bool
	wrote  bool
}

func (l *limitedRecorder) Header() http.Header { return l.header }

func (l *limitedRecorder) WriteHeader(code int) {
	if !l.wrote {
		l.code, l.wrote = code, true
	}
}

func (l *limitedRecorder) Write(b []byte) (int, error) {
	l.wrote = true
	if l.body.Len()+len(b) > l.limit {
		l.over = true
		return 0, fmt.Errorf("response larger than %d bytes", l.limit)
	}
	return l.body.Write(b)
}

// Flush is a no-op: the reverse proxy flushes every write (FlushInterval -1).
func (l *limitedRecorder) Flush() {}

// podsIn lists the pods of namespace ("" = all) that opts select: the pods
// metrics.k8s.io and custom.metrics.k8s.io answer for.
func (s *Server) podsIn(ctx context.Context, namespace string, opts api.ListOptions) ([]*api.Pod, error) {
	objs, _, err := s.reg.List(ctx, podKind, namespace, opts)
	if err != nil {
		return nil, err
	}
	pods := make([]*api.Pod, 0, len(objs))
	for _, o := range objs {
		pods = append(pods, o.(*api.Pod))
	}
	return pods, nil
}

// nodesOf is the nodes pods are bound to, each once, in the pods' order:
// the agents a metrics answer scrapes.
func nodesOf(pods []*api.Pod) []string {
	var nodes []string
	for _, p := range pods {
		if p.Spec.NodeName != "" && !slices.Contains(nodes, p.Spec.NodeName) {
			nodes = append(nodes, p.Spec.NodeName)
		}
	}
	return nodes
}
