package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
)

// The custom and external metrics APIs, served as prometheus-adapter
// serves them over Prometheus: here the "Prometheus" is a scrape of every
// node's DCGM exporter (api.DCGMMetricsPath, through nodes/proxy) at the
// time of the request, and the adapter's rules are its rule file
// (adapter_config.go; Config.MetricsAdapterConfig, by default
// DefaultAdapterConfig).
//
//   - custom.metrics.k8s.io/v1beta2: GET namespaces/NS/pods/NAME/METRIC
//     (NAME or * with labelSelector, metricLabelSelector on the series'
//     labels) answers a MetricValueList, one item per pod: its rule's
//     aggregation of the pod's series (the default rules sum by pod; a
//     pod with one GPU has its GPU's value).
//   - external.metrics.k8s.io/v1beta1: GET namespaces/NS/METRIC
//     (labelSelector on the series' labels) answers every matching series
//     of the cluster (the default rules: namespaced: false, each series),
//     or their aggregation.
//
// A metric no rule names is 404 "the server could not find the metric
// NAME for pods", prometheus-adapter's words.

const (
	customMetricsVersion   = "v1beta2"
	externalMetricsVersion = "v1beta1"
	customMetricsPrefix    = "/apis/" + api.CustomMetricsGroup
	externalMetricsPrefix  = "/apis/" + api.ExternalMetricsGroup
)

func customMetricsAPIGroup() apiGroup {
	gv := groupVersion{GroupVersion: api.CustomMetricsGroupVersion, Version: customMetricsVersion}
	return apiGroup{Name: api.CustomMetricsGroup, Versions: []groupVersion{gv}, PreferredVersion: gv}
}

func externalMetricsAPIGroup() apiGroup {
	gv := groupVersion{GroupVersion: api.ExternalMetricsGroupVersion, Version: externalMetricsVersion}
	return apiGroup{Name: api.ExternalMetricsGroup, Versions: []groupVersion{gv}, PreferredVersion: gv}
}

// series is one scraped series.
type series struct {
	name   string
	labels map[string]string
	value  float64
}

// serveCustomMetricsAPI answers the paths under the two groups; false for
// any other path.
func (s *Server) serveCustomMetricsAPI(w http.ResponseWriter, r *http.Request) bool {
	var external bool
	var rest string
	switch p := r.URL.Path; {
	case p == customMetricsPrefix || strings.HasPrefix(p, customMetricsPrefix+"/"):
		rest = strings.TrimPrefix(p, customMetricsPrefix)
	case p == externalMetricsPrefix || strings.HasPrefix(p, externalMetricsPrefix+"/"):
		external, rest = true, strings.TrimPrefix(p, externalMetricsPrefix)
	default:
		return false
	}
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	if parts[0] == "" {
		parts = nil
	}
	if r.Method != http.MethodGet {
		writeError(w, api.NewStatusError(http.StatusMethodNotAllowed, api.ReasonMethodNotAllowd, "the server does not allow this method on the requested resource"))
		return true
	}
	version, group := customMetricsVersion, customMetricsAPIGroup()
	if external {
		version, group = externalMetricsVersion, externalMetricsAPIGroup()
	}
	switch {
	case len(parts) == 0:
		writeAPIGroup(w, group)
	case parts[0] != version:
		writeError(w, notFoundPath())
	case len(parts) == 1:
		writeJSON(w, http.StatusOK, s.customResourceList(group.PreferredVersion.GroupVersion, external))
	case external && len(parts) == 4 && parts[1] == "namespaces":
		s.serveExternalMetric(w, r, parts[2], parts[3])
	case !external && len(parts) == 6 && parts[1] == "namespaces" && parts[3] == "pods":
		s.servePodsCustomMetric(w, r, parts[2], parts[4], parts[5])
	default:
		writeError(w, notFoundPath())
	}
	return true
}

func (s *Server) customResourceList(gv string, external bool) map[string]any {
	res := []apiResource{}
	seen := map[string]bool{}
	rules := s.adapter.pods
	if external {
		rules = s.adapter.external
	}
	for _, rule := range rules {
		if seen[rule.as] {
			continue
		}
		seen[rule.as] = true
		if external {
			res = append(res, apiResource{Name: rule.as, Namespaced: true, Kind: "ExternalMetricValueList", Verbs: []string{"get"}})
		} else {
			res = append(res, apiResource{Name: "pods/" + rule.as, Namespaced: true, Kind: "MetricValueList", Verbs: []string{"get"}})
		}
	}
	return map[string]any{"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": res}
}

func metricNotFound(metric, what string) error {
	return api.NewStatusError(http.StatusNotFound, api.ReasonNotFound, fmt.Sprintf("the server could not find the metric %s for %s", metric, what))
}

// servePodsCustomMetric answers namespaces/NS/pods/NAME|*/METRIC.
func (s *Server) servePodsCustomMetric(w http.ResponseWriter, r *http.Request, namespace, name, metric string) {
	ctx := r.Context()
	rule, ok := s.adapter.ruleFor(metric, false)
	if !ok {
		writeError(w, metricNotFound(metric, "pods"))
		return
	}
	q := r.URL.Query()
	msel, err := labels.Parse(q.Get("metricLabelSelector"))
	if err != nil {
		writeError(w, api.NewBadRequest(fmt.Sprintf("unable to parse metric label selector: %v", err)))
		return
	}
	opts := api.ListOptions{LabelSelector: q.Get("labelSelector")}
	var pods []*api.Pod
	if name != "*" {
		o, err := s.reg.Get(ctx, podKind, namespace, name)
		if err != nil {
			writeError(w, metricNotFound(metric, "pods "+name))
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
	now := time.Now()
	sums := podValues(s.scrapeDCGM(ctx, nodes), rule, namespace, msel)
	items := []api.MetricValue{}
	for _, p := range pods {
		v, ok := sums[p.Name]
		if !ok {
			continue
		}
		items = append(items, api.MetricValue{
			DescribedObject: api.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, APIVersion: "/v1"},
			Metric:          api.MetricIdentifier{Name: metric, Selector: selectorOf(msel)},
			Timestamp:       api.Time{Time: now.Truncate(time.Second)}, Value: milliQuantity(v)})
	}
	if name != "*" && len(items) == 0 {
		writeError(w, metricNotFound(metric, "pods "+name))
		return
	}
	writeJSON(w, http.StatusOK, api.MetricValueList{TypeMeta: api.TypeMeta{APIVersion: api.CustomMetricsGroupVersion, Kind: "MetricValueList"}, Items: items})
}

// serveExternalMetric answers namespaces/NS/METRIC: every matching series.
func (s *Server) serveExternalMetric(w http.ResponseWriter, r *http.Request, _ string, metric string) {
	ctx := r.Context()
	rule, ok := s.adapter.ruleFor(metric, true)
	if !ok {
		writeError(w, metricNotFound(metric, "external metrics"))
		return
	}
	sel, err := labels.Parse(r.URL.Query().Get("labelSelector"))
	if err != nil {
		writeError(w, api.NewBadRequest(fmt.Sprintf("unable to parse label selector: %v", err)))
		return
	}
	objs, _, err := s.reg.List(ctx, api.MustKindOf(&api.Node{}), "", api.ListOptions{})
	if err != nil {
		writeError(w, err)
		return
	}
	var nodes []string
	for _, o := range objs {
		nodes = append(nodes, o.GetObjectMeta().Name)
	}
	now := time.Now()
	items := []api.ExternalMetricValue{}
	for _, sr := range externalSeries(s.scrapeDCGM(ctx, nodes), rule, sel) {
		items = append(items, api.ExternalMetricValue{MetricName: metric, MetricLabels: sr.labels,
			Timestamp: api.Time{Time: now.Truncate(time.Second)}, Value: milliQuantity(sr.value)})
	}
	writeJSON(w, http.StatusOK, api.ExternalMetricValueList{TypeMeta: api.TypeMeta{APIVersion: api.ExternalMetricsGroupVersion, Kind: "ExternalMetricValueList"}, Items: items})
}

// podValues is the adapter's pods query: the rule's series of pods of
// namespace whose labels match msel, aggregated by pod.
func podValues(ss []series, rule adapterRule, namespace string, msel labels.Selector) map[string]float64 {
	byPod := map[string][]float64{}
	for _, sr := range ss {
		pod := sr.labels[rule.podLabel]
		if rule.matches(sr.name, sr.labels) && sr.labels[rule.nsLabel] == namespace && pod != "" && msel.Matches(labels.Set(sr.labels)) {
			byPod[pod] = append(byPod[pod], sr.value)
		}
	}
	out := make(map[string]float64, len(byPod))
	for pod, vs := range byPod {
		out[pod] = aggregate(rule.agg, vs)
	}
	return out
}

// externalSeries is the adapter's external query: the rule's series whose
// labels match sel, in a stable order, or their aggregation (one series
// without labels; none when nothing matched).
func externalSeries(ss []series, rule adapterRule, sel labels.Selector) []series {
	var out []series
	for _, sr := range ss {
		if rule.matches(sr.name, sr.labels) && sel.Matches(labels.Set(sr.labels)) {
			out = append(out, sr)
		}
	}
	if rule.agg != "" && len(out) > 0 {
		vs := make([]float64, len(out))
		for i, sr := range out {
			vs[i] = sr.value
		}
		return []series{{name: rule.series, labels: map[string]string{}, value: aggregate(rule.agg, vs)}}
	}
	sort.Slice(out, func(i, j int) bool { return labels.Set(out[i].labels).String() < labels.Set(out[j].labels).String() })
	return out
}

// parseDCGM reads an exporter's Prometheus text into series.
func parseDCGM(text []byte) ([]series, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return nil, err
	}
	var out []series
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			out = append(out, series{name: name, labels: labelMap(m), value: m.GetGauge().GetValue()})
		}
	}
	return out, nil
}

func selectorOf(sel labels.Selector) *api.LabelSelector {
	if sel.Empty() {
		return nil
	}
	reqs, _ := sel.Requirements()
	ls := &api.LabelSelector{}
	for _, rq := range reqs {
		ls.MatchExpressions = append(ls.MatchExpressions, api.LabelSelectorRequirement{Key: rq.Key(), Operator: operatorName(string(rq.Operator())), Values: sortedValues(rq.Values().UnsortedList())})
	}
	return ls
}

func operatorName(op string) string {
	switch op {
	case "=", "==", "in":
		return "In"
	case "!=", "notin":
		return "NotIn"
	case "exists":
		return "Exists"
	case "!":
		return "DoesNotExist"
	}
	return op
}

func sortedValues(v []string) []string { sort.Strings(v); return v }

// milliQuantity is a value as prometheus-adapter writes it: milli-units
// ("90", "90500m").
func milliQuantity(v float64) api.Quantity {
	return *resource.NewMilliQuantity(int64(v*1000), resource.DecimalSI)
}

// scrapeDCGM reads every node's DCGM series (nodes without GPUs or that
// fail are left out, logged at debug level).
func (s *Server) scrapeDCGM(ctx context.Context, nodes []string) []series {
	var out []series
	fromNodes(s, nodes, "custom metrics", func(n string) ([]series, error) { return s.scrapeNodeDCGM(ctx, n) },
		func(_ string, ss []series) { out = append(out, ss...) })
	return out
}

func (s *Server) scrapeNodeDCGM(ctx context.Context, node string) ([]series, error) {
	ctx, cancel := context.WithTimeout(ctx, metricsFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, nodeProxyPrefix+node+"/proxy"+api.DCGMMetricsPath, nil)
	if err != nil {
		return nil, err
	}
	rec := &limitedRecorder{header: http.Header{}, code: http.StatusOK, limit: metricsMaxSummaryBytes}
	s.proxy.serveNode(rec, req, node, api.DCGMMetricsPath)
	if rec.code != http.StatusOK {
		return nil, fmt.Errorf("DCGM metrics of node %s: %d %s", node, rec.code, bytes.TrimSpace(rec.body.Bytes()))
	}
	if rec.over {
		return nil, fmt.Errorf("DCGM metrics of node %s: larger than %d bytes", node, metricsMaxSummaryBytes)
	}
	out, err := parseDCGM(rec.body.Bytes())
	if err != nil {
		return nil, fmt.Errorf("DCGM metrics of node %s: %w", node, err)
	}
	return out, nil
}

func labelMap(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		if l.GetValue() != "" { // empty is absent, as Prometheus reads it
			out[l.GetName()] = l.GetValue()
		}
	}
	return out
}
