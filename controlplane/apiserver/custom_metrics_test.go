package apiserver

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

// dcgmText is what a node's exporter serves (agent/gpu/dcgm): two pods of
// default on GPUs 0 and 1, a pod of team-a on GPU 2, GPU 3 free.
const dcgmText = `# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA A100-SXM4-80GB",GPU_I_PROFILE="",GPU_I_ID="",Hostname="n1",container="c",namespace="default",pod="web-1"} 90
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA A100-SXM4-80GB",GPU_I_PROFILE="",GPU_I_ID="",Hostname="n1",container="c",namespace="default",pod="web-2"} 80.5
DCGM_FI_DEV_GPU_UTIL{gpu="2",UUID="GPU-c",device="nvidia2",modelName="NVIDIA A100-SXM4-80GB",GPU_I_PROFILE="",GPU_I_ID="",Hostname="n1",container="c",namespace="team-a",pod="x"} 10
DCGM_FI_DEV_GPU_UTIL{gpu="3",UUID="GPU-d",device="nvidia3",modelName="NVIDIA A100-SXM4-80GB",GPU_I_PROFILE="",GPU_I_ID="",Hostname="n1",container="",namespace="",pod=""} 0
# HELP DCGM_FI_DEV_FB_USED Frame buffer memory used (in MB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA A100-SXM4-80GB",GPU_I_PROFILE="",GPU_I_ID="",Hostname="n1",container="c",namespace="default",pod="web-1"} 1024
`

// The adapter's queries over an exporter's text: pods metrics by pod of
// the namespace (under both names of the GPU utilisation), external
// metrics by series labels, unknown metrics refused.
func TestCustomMetricsAdapterRules(t *testing.T) {
	ss, err := parseDCGM([]byte(dcgmText))
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 5 {
		t.Fatalf("%d series, want 5", len(ss))
	}
	rules := mustDefaultAdapterRules()
	for _, name := range []string{"DCGM_FI_DEV_GPU_UTIL", "gpu_utilization_percent"} {
		rule, ok := rules.ruleFor(name, false)
		if !ok {
			t.Fatalf("no rule for %s", name)
		}
		got := podValues(ss, rule, "default", labels.Everything())
		if len(got) != 2 || got["web-1"] != 90 || got["web-2"] != 80.5 {
			t.Errorf("%s: %v", name, got)
		}
	}
	rule, _ := rules.ruleFor("DCGM_FI_DEV_GPU_UTIL", false)
	sel, _ := labels.Parse("gpu=1")
	if got := podValues(ss, rule, "default", sel); len(got) != 1 || got["web-2"] != 80.5 {
		t.Errorf("metricLabelSelector gpu=1: %v", got)
	}
	if q := milliQuantity(80.5); q.String() != "80500m" {
		t.Errorf("quantity %s, want 80500m as prometheus-adapter writes it", q.String())
	}
	rule, _ = rules.ruleFor("DCGM_FI_DEV_GPU_UTIL", true)
	all := externalSeries(ss, rule, labels.Everything())
	if len(all) != 4 {
		t.Errorf("external: %d series, want 4", len(all))
	}
	free, _ := labels.Parse("!pod")
	if got := externalSeries(ss, rule, free); len(got) != 1 || got[0].labels["gpu"] != "3" {
		t.Errorf("external !pod: %+v", got)
	}
	if _, ok := rules.ruleFor("nvidia_gpu_duty_cycle", false); ok {
		t.Error("a metric no rule names is served")
	}
}
