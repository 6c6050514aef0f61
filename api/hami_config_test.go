package api

import (
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

func exampleConfigMap(t *testing.T, file, key string) []byte {
	t.Helper()
	raw, err := os.ReadFile("../examples/gpu-sharing/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(raw, &cm); err != nil || cm.Data[key] == "" {
		t.Fatalf("%s: %v %v", file, err, cm.Data)
	}
	return []byte(cm.Data[key])
}

// The examples in HAMi's chart's shape parse unchanged, and resolve per
// node: the node's non-zero overrides over the device config over HAMi's
// defaults.
func TestHAMiConfigExamples(t *testing.T) {
	dc, err := ParseHAMiDeviceConfig(exampleConfigMap(t, "hami-scheduler-device.yaml", HAMiDeviceConfigKey))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := ParseHAMiNodeConfigs(exampleConfigMap(t, "hami-device-plugin.yaml", HAMiNodeConfigKey))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := NodeSettings(dc, nc, "other"), (HAMiNodeSettings{SplitCount: 4, MemoryScaling: 1.5, CoreScaling: 1}); got != want {
		t.Errorf("other node: %+v, want %+v", got, want)
	}
	got := NodeSettings(dc, nc, "gpu-1")
	if want := (HAMiNodeSettings{SplitCount: 8, MemoryScaling: 2, CoreScaling: 1, FilterIndexes: "7"}); got != want {
		t.Errorf("gpu-1: %+v, want %+v", got, want)
	}
	if !got.Filtered("GPU-x", 7) || got.Filtered("GPU-x", 6) {
		t.Error("filterdevices.index 7")
	}
	if got.ScaledMemory(40960) != 81920 || got.ScaledCores() != 100 {
		t.Errorf("scaled %d MiB %d cores", got.ScaledMemory(40960), got.ScaledCores())
	}
	if NodeSettings(nil, nil, "x") != HAMiDefaultNodeSettings() || HAMiDefaultNodeSettings().SplitCount != 10 {
		t.Error("no config is HAMi's defaults: 10 slices, no scaling")
	}
	if d := dc.RequestDefaults(); d != (HAMiRequestDefaults{}) {
		t.Errorf("chart defaults: %+v", d)
	}
}

// A wrong config is refused naming the field; unknown fields by path.
func TestHAMiConfigRefused(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"nvidia:\n  deviceSplitCount: 0\n", "nvidia.deviceSplitCount: Invalid value: 0: must be between 1 and 1000"},
		{"nvidia:\n  deviceMemoryScaling: -1\n", "nvidia.deviceMemoryScaling: Invalid value: -1: must be more than 0"},
		{"nvidia:\n  deviceCoreScaling: 0\n", "nvidia.deviceCoreScaling: Invalid value: 0"},
		{"nvidia:\n  defaultCores: 101\n", "nvidia.defaultCores: Invalid value: 101: must be between 0 and 100"},
		{"nvidia:\n  defaultMemory: -5\n", "nvidia.defaultMemory: Invalid value: -5"},
		{"nvidia:\n  deviceSplitCont: 4\n", "nvidia.deviceSplitCont: unknown field"},
		{"nvidia:\n  resourceMemoryName: example.com/mem\n", `nvidia.resourceMemoryName: Unsupported value: "example.com/mem": supported values: "nvidia.com/gpumem"`},
		{"nvidia:\n  overwriteEnv: true\n", "nvidia.overwriteEnv: Invalid value: true: not supported by skiff's HAMi"},
		{"nvidia:\n  defaultGPUNum: 2\n", "nvidia.defaultGPUNum: Unsupported value: 2"},
		{"nvidia:\n  deviceSplitCount: ten\n", "deviceSplitCount"},
		{"nvidai:\n  deviceSplitCount: 4\n", "nvidai: unknown field"},
	} {
		_, err := ParseHAMiDeviceConfig([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
	for _, tc := range []struct{ json, want string }{
		{`{"nodeconfig":[{"name":"a","devicesplitcount":-1}]}`, "nodeconfig[0].devicesplitcount: Invalid value: -1"},
		{`{"nodeconfig":[{"name":"a","migstrategy":"mixed"}]}`, `nodeconfig[0].migstrategy: Unsupported value: "mixed"`},
		{`{"nodeconfig":[{"name":"a","operatingmode":"mps"}]}`, `nodeconfig[0].operatingmode: Unsupported value: "mps"`},
		{`{"nodeconfig":[{"devicesplitcount":2}]}`, "nodeconfig[0].name: Required value"},
		{`{"nodeconfig":[{"name":"a","devicememoryscaling":-2}]}`, "nodeconfig[0].devicememoryscaling: Invalid value: -2"},
		{`{"nodeconfig":[{"name":"a","splitcount":2}]}`, "nodeconfig[0].splitcount: unknown field"},
	} {
		_, err := ParseHAMiNodeConfigs([]byte(tc.json))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.json, err, tc.want)
		}
	}
}

// HAMi's webhook's defaultGPUNum: limiting memory or cores but not cards
// gives one card.
func TestHAMiDefaultGPUNum(t *testing.T) {
	p := &Pod{}
	p.Spec.Containers = []Container{{Name: "a", Resources: ResourceRequirements{Limits: ResourceList{HAMiResourceMem: resource.MustParse("3000")}}},
		{Name: "b", Resources: ResourceRequirements{Limits: ResourceList{ResourceNvidiaGPU: resource.MustParse("2"), HAMiResourceCores: resource.MustParse("30")}}},
		{Name: "c"}}
	if err := HAMiMutateAdmission(p); err != nil {
		t.Fatal(err)
	}
	a, b, c := p.Spec.Containers[0].Resources, p.Spec.Containers[1].Resources, p.Spec.Containers[2].Resources
	if q := a.Limits[ResourceNvidiaGPU]; q.Value() != 1 {
		t.Errorf("a: %v", a.Limits)
	}
	if q := a.Requests[ResourceNvidiaGPU]; q.Value() != 1 {
		t.Errorf("a requests: %v", a.Requests)
	}
	if q := b.Limits[ResourceNvidiaGPU]; q.Value() != 2 {
		t.Errorf("b: %v", b.Limits)
	}
	if _, ok := c.Limits[ResourceNvidiaGPU]; ok {
		t.Errorf("c asked nothing: %v", c.Limits)
	}
}
