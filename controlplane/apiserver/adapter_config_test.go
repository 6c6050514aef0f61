package apiserver

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

// kubernetesExamplesRule is the gpu_utilization_percent rule of
// kubernetes/examples' AI/vllm-deployment/hpa/prometheus-adapter.yaml (its
// ConfigMap's config.yaml, the rule indented as a rule), over the series
// its PrometheusRule records.
const kubernetesExamplesRule = `rules:
- seriesQuery: 'dcgm_fi_dev_gpu_util_relabelled'
  resources:
    overrides:
      namespace: {resource: "namespace"}
      pod: {resource: "pod"}
  name:
    matches: "dcgm_fi_dev_gpu_util_relabelled"
    as: "gpu_utilization_percent"
  metricsQuery: 'sum(dcgm_fi_dev_gpu_util_relabelled{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
`

// A rule file in prometheus-adapter's format names and reads the series:
// kubernetes/examples' rule serves gpu_utilization_percent from its
// series, avg and max aggregate a pod's GPUs, name.matches/as rename with
// groups, label matchers filter, external rules aggregate.
func TestAdapterConfigRules(t *testing.T) {
	rs, err := ParseAdapterConfig([]byte(kubernetesExamplesRule))
	if err != nil {
		t.Fatal(err)
	}
	ss := []series{
		{"dcgm_fi_dev_gpu_util_relabelled", map[string]string{"namespace": "default", "pod": "vllm-1", "gpu": "0"}, 30},
		{"dcgm_fi_dev_gpu_util_relabelled", map[string]string{"namespace": "default", "pod": "vllm-1", "gpu": "1"}, 50},
		{"dcgm_fi_dev_gpu_util_relabelled", map[string]string{"namespace": "other", "pod": "vllm-1", "gpu": "2"}, 99},
		{"DCGM_FI_DEV_GPU_UTIL", map[string]string{"namespace": "default", "pod": "vllm-1", "gpu": "0"}, 30},
	}
	rule, ok := rs.ruleFor("gpu_utilization_percent", false)
	if !ok {
		t.Fatal("kubernetes/examples' rule serves no gpu_utilization_percent")
	}
	if got := podValues(ss, rule, "default", labels.Everything()); len(got) != 1 || got["vllm-1"] != 80 {
		t.Errorf("gpu_utilization_percent by pod: %v, want vllm-1 = 30 + 50", got)
	}
	if _, ok := rs.ruleFor("dcgm_fi_dev_gpu_util_relabelled", false); ok {
		t.Error("the renamed series is served under its own name too")
	}

	rs, err = ParseAdapterConfig([]byte(`rules:
- seriesQuery: '{__name__="DCGM_FI_DEV_GPU_UTIL",gpu=~"0|1",pod!=""}'
  resources: {template: <<.Resource>>}
  name: {matches: "^DCGM_FI_DEV_(.*)_UTIL$", as: "${1}_util_avg"}
  metricsQuery: avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)
- seriesQuery: DCGM_FI_DEV_GPU_UTIL{pod!=""}
  resources: {overrides: {ns: {resource: namespaces}, pod: {resource: pods}}}
  name: {as: gpu_util_max}
  metricsQuery: max(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)
externalRules:
- seriesQuery: DCGM_FI_DEV_GPU_UTIL
  name: {as: cluster_gpu_util}
  metricsQuery: sum(DCGM_FI_DEV_GPU_UTIL{<<.LabelMatchers>>})
`))
	if err != nil {
		t.Fatal(err)
	}
	ss = []series{
		{"DCGM_FI_DEV_GPU_UTIL", map[string]string{"namespace": "default", "ns": "default", "pod": "p", "gpu": "0"}, 30},
		{"DCGM_FI_DEV_GPU_UTIL", map[string]string{"namespace": "default", "ns": "default", "pod": "p", "gpu": "1"}, 50},
		{"DCGM_FI_DEV_GPU_UTIL", map[string]string{"namespace": "default", "ns": "default", "pod": "p", "gpu": "2"}, 100},
		{"DCGM_FI_DEV_GPU_UTIL", map[string]string{"gpu": "3"}, 5},
	}
	avg, ok := rs.ruleFor("GPU_util_avg", false)
	if got := podValues(ss, avg, "default", labels.Everything()); !ok || got["p"] != 40 {
		t.Errorf("GPU_util_avg (gpus 0 and 1 only): %v %v, want 40", ok, got)
	}
	mx, _ := rs.ruleFor("gpu_util_max", false)
	if got := podValues(ss, mx, "default", labels.Everything()); got["p"] != 100 {
		t.Errorf("gpu_util_max: %v, want 100", got)
	}
	ext, ok := rs.ruleFor("cluster_gpu_util", true)
	if got := externalSeries(ss, ext, labels.Everything()); !ok || len(got) != 1 || got[0].value != 185 || len(got[0].labels) != 0 {
		t.Errorf("cluster_gpu_util: %+v, want one series of 185", got)
	}
	if _, ok := rs.ruleFor("cluster_gpu_util", false); ok {
		t.Error("an external rule serves a pods metric")
	}
}

// What skiff cannot evaluate is refused with the field's path, not
// ignored; the default file parses.
func TestAdapterConfigRefusals(t *testing.T) {
	if _, err := ParseAdapterConfig(DefaultAdapterConfig); err != nil {
		t.Fatalf("the default rule file: %v", err)
	}
	pod := `  resources: {template: <<.Resource>>}
`
	for _, tc := range []struct{ file, want string }{
		{"rules:\n- seriesQuery: DCGM_FI_DEV_GPU_UTIL\n" + pod + "  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'\n",
			`rules[0].metricsQuery: "sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)": skiff evaluates only AGG(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)`},
		{"rules:\n- seriesQuery: '{__name__=~\"^DCGM_FI_DEV_.*\"}'\n" + pod, `rules[0].seriesQuery: "{__name__=~\"^DCGM_FI_DEV_.*\"}": skiff reads one series: __name__ only with =`},
		{"rules:\n- seriesQuery: DCGM_FI_DEV_GPU_UTIL\n  resources: {overrides: {Hostname: {resource: node}}}\n", `rules[0].resources.overrides.Hostname: "node": skiff's custom metrics API serves pods metrics`},
		{"rules:\n- seriesQuery: DCGM_FI_DEV_GPU_UTIL\n", "rules[0].resources: a pods rule needs overrides"},
		{"rules:\n- seriesQuery: DCGM_FI_DEV_GPU_UTIL\n" + pod + "  name: {matches: ^FB_}\n", `rules[0].name.matches: "^FB_" does not match the series DCGM_FI_DEV_GPU_UTIL`},
		{"rules:\n- seriesQuery: DCGM_FI_DEV_GPU_UTIL\n" + pod + "  metricsQuery: sum(DCGM_FI_DEV_FB_USED{<<.LabelMatchers>>}) by (<<.GroupBy>>)\n", "reads DCGM_FI_DEV_FB_USED, not the rule's series DCGM_FI_DEV_GPU_UTIL"},
		{"rules:\n- seriesQuery: DCGM_FI_DEV_GPU_UTIL\n" + pod + "  seriesFilters: [{is: ^x}]\n", "rules[0].seriesFilters: not supported"},
		{"rules:\n- seriesQuery: DCGM_FI_DEV_GPU_UTIL\n" + pod + "  metricsQuerry: x\n", `unknown field "metricsQuerry"`},
		{"resourceRules:\n  cpu: {containerQuery: x}\n", "resourceRules: not supported"},
		{"externalRules:\n- seriesQuery: DCGM_FI_DEV_GPU_UTIL\n  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)\n", "externalRules[0].metricsQuery"},
	} {
		_, err := ParseAdapterConfig([]byte(tc.file))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.file, err, tc.want)
		}
	}
}

// New refuses a rule file it cannot evaluate (skiff up
// --metrics-adapter-config), and serves the rules of one it can: the
// metrics it names are in custom.metrics.k8s.io's discovery, the default's
// are gone.
func TestNewMetricsAdapterConfig(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Token = testToken
	cfg.MetricsAdapterConfig = []byte("rules:\n- seriesQuery: DCGM_FI_DEV_GPU_UTIL\n  resources: {template: <<.Resource>>}\n  metricsQuery: rate(x[1m])\n")
	if _, err := New(cfg, newEnv(t).reg, nil); err == nil || !strings.Contains(err.Error(), "api server config: metrics adapter config: rules[0].metricsQuery") {
		t.Fatalf("New with a bad rule file: %v", err)
	}
	cfg.MetricsAdapterConfig = []byte(kubernetesExamplesRule)
	srv, err := New(cfg, newEnv(t).reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	list := srv.customResourceList("custom.metrics.k8s.io/v1beta2", false)["resources"].([]apiResource)
	if len(list) != 1 || list[0].Name != "pods/gpu_utilization_percent" {
		t.Errorf("discovery with kubernetes/examples' rule: %+v", list)
	}
	if ext := srv.customResourceList("external.metrics.k8s.io/v1beta1", true)["resources"].([]apiResource); len(ext) != 0 {
		t.Errorf("external metrics without externalRules: %+v", ext)
	}
}
