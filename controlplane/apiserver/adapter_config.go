package apiserver

import (
	_ "embed"
	"fmt"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// prometheus-adapter's rule file (its --config: rules and externalRules),
// the rules by which the custom and external metrics APIs name and read
// the DCGM exporters' series (custom_metrics.go). skiff has no Prometheus:
// a rule's seriesQuery names one series (NAME or NAME{label matchers}, or
// {__name__="NAME", ...}), and its metricsQuery is one of the adapter's
// aggregations of it:
//
//	AGG(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)   (rules; AGG sum, avg, max, min)
//	<<.Series>>{<<.LabelMatchers>>}                          (externalRules: each series)
//	AGG(<<.Series>>{<<.LabelMatchers>>})                     (externalRules: one value)
//
// where the series may also be written out by name, as kubernetes/examples
// does. Anything else (other PromQL, resourceRules, seriesFilters, rules
// on other resources than pods and namespaces) is refused with the path of
// the field, never ignored. Without a file the API server serves
// DefaultAdapterConfig.

// DefaultAdapterConfig is the rule file served without --metrics-adapter-
// config: prometheus-adapter's rules for dcgm-exporter (each DCGM_FI_DEV_*
// series as a pods metric and an external metric of its own name) and
// kubernetes/examples' gpu_utilization_percent (AI/vllm-deployment/hpa:
// DCGM_FI_DEV_GPU_UTIL renamed, there through a Prometheus recording rule
// that copies exported_pod to pod; skiff's exporter labels pod itself).
//
//go:embed adapter_config.yaml
var DefaultAdapterConfig []byte

type adapterConfigFile struct {
	Rules         []adapterRuleSpec `json:"rules"`
	ExternalRules []adapterRuleSpec `json:"externalRules"`
	ResourceRules any               `json:"resourceRules"`
}

type adapterRuleSpec struct {
	SeriesQuery   string            `json:"seriesQuery"`
	SeriesFilters any               `json:"seriesFilters"`
	Resources     *adapterResources `json:"resources"`
	Name          adapterName       `json:"name"`
	MetricsQuery  string            `json:"metricsQuery"`
}

type adapterResources struct {
	Overrides  map[string]adapterGroupResource `json:"overrides"`
	Template   string                          `json:"template"`
	Namespaced *bool                           `json:"namespaced"`
}

type adapterGroupResource struct {
	Group    string `json:"group"`
	Resource string `json:"resource"`
}

type adapterName struct {
	Matches string `json:"matches"`
	As      string `json:"as"`
}

// adapterRule is one compiled rule: the series it reads and the metric
// name it serves.
type adapterRule struct {
	series   string         // the series' name
	matchers []labelMatcher // the seriesQuery's label matchers
	as       string         // the metric served
	nsLabel  string         // the series label naming the pod's namespace
	podLabel string         // ... and the pod ("" in an external rule)
	agg      string         // sum, avg, max, min; "" each series (external)
	external bool
}

// labelMatcher is one PromQL label matcher.
type labelMatcher struct {
	label, op, value string
	re               *regexp.Regexp // =~ and !~, anchored as PromQL's
}

func (m labelMatcher) matches(ls map[string]string) bool {
	v := ls[m.label]
	switch m.op {
	case "=":
		return v == m.value
	case "!=":
		return v != m.value
	case "=~":
		return m.re.MatchString(v)
	default: // !~
		return !m.re.MatchString(v)
	}
}

// matches: a series is the rule's.
func (r adapterRule) matches(name string, ls map[string]string) bool {
	if name != r.series {
		return false
	}
	for _, m := range r.matchers {
		if !m.matches(ls) {
			return false
		}
	}
	return true
}

// adapterRules are a rule file's rules.
type adapterRules struct {
	pods, external []adapterRule
}

// ParseAdapterConfig reads a prometheus-adapter rule file, refusing what
// skiff does not evaluate with the field's path.
func ParseAdapterConfig(data []byte) (*adapterRules, error) {
	var f adapterConfigFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("metrics adapter config: %w", err)
	}
	if f.ResourceRules != nil {
		return nil, fmt.Errorf("metrics adapter config: resourceRules: not supported: skiff's API server serves metrics.k8s.io (cpu, memory) itself")
	}
	out := &adapterRules{}
	for i, spec := range f.Rules {
		r, err := compileAdapterRule(spec, false)
		if err != nil {
			return nil, fmt.Errorf("metrics adapter config: rules[%d].%w", i, err)
		}
		out.pods = append(out.pods, r)
	}
	for i, spec := range f.ExternalRules {
		r, err := compileAdapterRule(spec, true)
		if err != nil {
			return nil, fmt.Errorf("metrics adapter config: externalRules[%d].%w", i, err)
		}
		out.external = append(out.external, r)
	}
	return out, nil
}

// mustDefaultAdapterRules are DefaultAdapterConfig's rules.
func mustDefaultAdapterRules() *adapterRules {
	r, err := ParseAdapterConfig(DefaultAdapterConfig)
	if err != nil {
		panic(err)
	}
	return r
}

var (
	// seriesQueryRE: NAME, NAME{...} or {...}.
	seriesQueryRE = regexp.MustCompile(`^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*(?:\{(.*)\})?\s*$`)
	// matcherRE: one label matcher.
	matcherRE = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*$`)
	// aggQueryRE: AGG(SERIES{<<.LabelMatchers>>}) [by (<<.GroupBy>>)], or
	// SERIES{<<.LabelMatchers>>}.
	aggQueryRE   = regexp.MustCompile(`^\s*(sum|avg|max|min)\s*\(\s*(<<\.Series>>|[a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{\s*<<\.LabelMatchers>>\s*\}\s*\)\s*(by\s*\(\s*<<\.GroupBy>>\s*\))?\s*$`)
	plainQueryRE = regexp.MustCompile(`^\s*(<<\.Series>>|[a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{\s*<<\.LabelMatchers>>\s*\}\s*$`)
)

func compileAdapterRule(spec adapterRuleSpec, external bool) (adapterRule, error) {
	r := adapterRule{external: external}
	if spec.SeriesFilters != nil {
		return r, fmt.Errorf("seriesFilters: not supported: put the filter in seriesQuery's label matchers")
	}
	m := seriesQueryRE.FindStringSubmatch(spec.SeriesQuery)
	if m == nil || spec.SeriesQuery == "" {
		return r, fmt.Errorf("seriesQuery: %q: skiff reads one series: NAME or NAME{label matchers}", spec.SeriesQuery)
	}
	r.series = m[1]
	if strings.TrimSpace(m[2]) != "" {
		for _, part := range strings.Split(m[2], ",") {
			if strings.TrimSpace(part) == "" {
				continue
			}
			lm := matcherRE.FindStringSubmatch(part)
			if lm == nil {
				return r, fmt.Errorf("seriesQuery: %q: bad label matcher %q", spec.SeriesQuery, strings.TrimSpace(part))
			}
			value := strings.ReplaceAll(lm[3], `\"`, `"`)
			if lm[1] == "__name__" {
				if lm[2] != "=" || r.series != "" {
					return r, fmt.Errorf("seriesQuery: %q: skiff reads one series: __name__ only with =, and without a name before the braces", spec.SeriesQuery)
				}
				r.series = value
				continue
			}
			mt := labelMatcher{label: lm[1], op: lm[2], value: value}
			if mt.op == "=~" || mt.op == "!~" {
				re, err := regexp.Compile("^(?:" + value + ")$")
				if err != nil {
					return r, fmt.Errorf("seriesQuery: %q: %v", spec.SeriesQuery, err)
				}
				mt.re = re
			}
			r.matchers = append(r.matchers, mt)
		}
	}
	if r.series == "" {
		return r, fmt.Errorf("seriesQuery: %q: no series name", spec.SeriesQuery)
	}
	as, err := metricName(r.series, spec.Name)
	if err != nil {
		return r, err
	}
	r.as = as
	if err := r.resources(spec.Resources); err != nil {
		return r, err
	}
	return r, r.query(spec.MetricsQuery)
}

// metricName is the adapter's naming: name.matches (default ^(.*)$)
// against the series name, name.as (default $1, or $0 without a group).
func metricName(series string, n adapterName) (string, error) {
	pat := n.Matches
	if pat == "" {
		pat = "^(.*)$"
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return "", fmt.Errorf("name.matches: %v", err)
	}
	idx := re.FindStringSubmatchIndex(series)
	if idx == nil {
		return "", fmt.Errorf("name.matches: %q does not match the series %s", pat, series)
	}
	tmpl := n.As
	if tmpl == "" {
		tmpl = "$0"
		if re.NumSubexp() > 0 {
			tmpl = "$1"
		}
	}
	as := string(re.ExpandString(nil, tmpl, series, idx))
	if as == "" || !seriesQueryRE.MatchString(as) || strings.ContainsAny(as, "{}/ ") {
		return "", fmt.Errorf("name.as: %q gives the metric name %q, not a valid one", tmpl, as)
	}
	return as, nil
}

// resources: which series labels name the namespace and the pod.
func (r *adapterRule) resources(res *adapterResources) error {
	if res == nil {
		if !r.external {
			return fmt.Errorf("resources: a pods rule needs overrides (namespace: {resource: namespace}, pod: {resource: pod}) or template: <<.Resource>>")
		}
		return nil
	}
	if res.Namespaced != nil && !*res.Namespaced && !r.external {
		return fmt.Errorf("resources.namespaced: false only in externalRules")
	}
	if t := res.Template; t != "" {
		if t != "<<.Resource>>" {
			return fmt.Errorf("resources.template: %q: skiff's series carry the labels namespace and pod: <<.Resource>> only", t)
		}
		r.nsLabel, r.podLabel = "namespace", "pod"
	}
	for label, gr := range res.Overrides {
		switch {
		case gr.Group == "" && (gr.Resource == "namespace" || gr.Resource == "namespaces"):
			r.nsLabel = label
		case gr.Group == "" && (gr.Resource == "pod" || gr.Resource == "pods") && !r.external:
			r.podLabel = label
		default:
			return fmt.Errorf("resources.overrides.%s: %q: skiff's custom metrics API serves pods metrics (and namespaces for external ones) only", label, gr.Resource)
		}
	}
	if !r.external && (r.nsLabel == "" || r.podLabel == "") {
		return fmt.Errorf("resources.overrides: a pods rule needs a namespace and a pod label")
	}
	return nil
}

// query: the metricsQuery's aggregation.
func (r *adapterRule) query(q string) error {
	if q == "" {
		q = "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)"
		if r.external {
			q = "<<.Series>>{<<.LabelMatchers>>}"
		}
	}
	series := func(s string) error {
		if s != "<<.Series>>" && s != r.series {
			return fmt.Errorf("metricsQuery: %q reads %s, not the rule's series %s", q, s, r.series)
		}
		return nil
	}
	if m := aggQueryRE.FindStringSubmatch(q); m != nil {
		switch {
		case !r.external && m[3] == "":
			return fmt.Errorf("metricsQuery: %q: a pods rule groups by (<<.GroupBy>>)", q)
		case r.external && m[3] != "":
			return fmt.Errorf("metricsQuery: %q: skiff's external rules take each series or AGG(...) of them, without by", q)
		}
		r.agg = m[1]
		return series(m[2])
	}
	if m := plainQueryRE.FindStringSubmatch(q); m != nil && r.external {
		return series(m[1])
	}
	want := "AGG(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>), AGG one of sum, avg, max, min"
	if r.external {
		want = "<<.Series>>{<<.LabelMatchers>>} or AGG(<<.Series>>{<<.LabelMatchers>>})"
	}
	return fmt.Errorf("metricsQuery: %q: skiff evaluates only %s", q, want)
}

// ruleFor is the rule serving metric (pods or external).
func (rs *adapterRules) ruleFor(metric string, external bool) (adapterRule, bool) {
	list := rs.pods
	if external {
		list = rs.external
	}
	for _, r := range list {
		if r.as == metric {
			return r, true
		}
	}
	return adapterRule{}, false
}

// aggregate folds vs by the rule's aggregation.
func aggregate(agg string, vs []float64) float64 {
	out := vs[0]
	for _, v := range vs[1:] {
		switch agg {
		case "max":
			out = max(out, v)
		case "min":
			out = min(out, v)
		default: // sum, avg
			out += v
		}
	}
	if agg == "avg" {
		out /= float64(len(vs))
	}
	return out
}
