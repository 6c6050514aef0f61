package api

import (
	"encoding/json"
	"strings"
	"testing"
)

// NVIDIA's quick start (k8s-dra-driver-gpu demo/specs/quickstart): a
// template with one request, and a pod naming it.
const quickStartYAML = `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  namespace: gpu-test1
  name: single-gpu
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
`

func TestQuickStartTemplateDefaults(t *testing.T) {
	tmpl := mustDecode(t, quickStartYAML).(*ResourceClaimTemplate)
	SetDefaults(tmpl)
	if errs := Validate(tmpl); len(errs) > 0 {
		t.Fatalf("quick start template invalid: %v", errs)
	}
	e := tmpl.Spec.Spec.Devices.Requests[0].Exactly
	if e.AllocationMode != DeviceAllocationModeExactCount || e.Count != 1 {
		t.Errorf("defaults: mode %q count %d, want ExactCount 1", e.AllocationMode, e.Count)
	}
}

// A claim in v1beta1's shape (the request's fields directly in the
// request, Kubernetes 1.31-1.33 tutorials) is stored as v1 (under
// exactly) and converted back for a v1beta1 reader.
func TestResourceClaimV1beta1Conversion(t *testing.T) {
	const v1beta1 = `apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaim
metadata: {name: two-gpus, namespace: default, labels: {team: a}}
spec:
  devices:
    requests:
    - name: gpus
      deviceClassName: gpu.nvidia.com
      count: 2
      allocationMode: ExactCount
      selectors:
      - cel: {expression: "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA')"}
    constraints:
    - requests: [gpus]
      matchAttribute: skiff.dev/nvlinkDomain
`
	c := mustDecode(t, v1beta1).(*ResourceClaim)
	if c.APIVersion != "resource.k8s.io/v1" || c.Labels["team"] != "a" {
		t.Errorf("stored as %s, labels %v", c.APIVersion, c.Labels)
	}
	r := c.Spec.Devices.Requests[0]
	if r.Exactly == nil || r.Exactly.DeviceClassName != "gpu.nvidia.com" || r.Exactly.Count != 2 || len(r.Exactly.Selectors) != 1 {
		t.Fatalf("request %+v, want exactly{gpu.nvidia.com, count 2, one selector}", r)
	}
	if errs := Validate(c); len(errs) > 0 {
		t.Fatalf("invalid: %v", errs)
	}
	k := MustKindOf(c)
	sv, ok := k.ServedAt("v1beta1")
	if !ok || sv == nil {
		t.Fatal("v1beta1 not served")
	}
	if !strings.Contains(sv.Warning, "resource.k8s.io/v1beta1 ResourceClaim is deprecated") {
		t.Errorf("warning %q", sv.Warning)
	}
	stored, _ := json.Marshal(c)
	back, err := k.ConvertFromStored(sv, stored)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(back, &m); err != nil {
		t.Fatal(err)
	}
	req := SubTree(m, "spec", "devices")["requests"].([]any)[0].(map[string]any)
	if m["apiVersion"] != "resource.k8s.io/v1beta1" || req["deviceClassName"] != "gpu.nvidia.com" || req["exactly"] != nil {
		t.Errorf("v1beta1 answer %s", back)
	}
	// v1beta2 has v1's shape.
	sv2, _ := k.ServedAt("v1beta2")
	b2, err := k.ConvertFromStored(sv2, stored)
	if err != nil || !strings.Contains(string(b2), `"exactly":{`) {
		t.Errorf("v1beta2 answer %s, %v", b2, err)
	}
}

func TestValidateResourceClaim(t *testing.T) {
	base := func(req string) string {
		return "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c, namespace: default}\nspec:\n  devices:\n" + req
	}
	many := "    requests:\n    - name: r\n      firstAvailable:\n"
	for i := range 9 {
		many += "      - {name: s" + string(rune('a'+i)) + ", deviceClassName: gpu}\n"
	}
	cases := []struct {
		name, yaml, want string
	}{
		{"ok", base("    requests:\n    - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 2}}\n"), ""},
		{"all with count", base("    requests:\n    - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com, allocationMode: All, count: 2}}\n"),
			"spec.devices.requests[0].exactly.count: Invalid value: 2: must not be specified when allocationMode is 'All'"},
		{"bad mode", base("    requests:\n    - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com, allocationMode: Some}}\n"),
			`spec.devices.requests[0].exactly.allocationMode: Unsupported value: "Some"`},
		{"neither", base("    requests:\n    - {name: gpu}\n"),
			"spec.devices.requests[0]: Required value: exactly one of `exactly` or `firstAvailable` is required"},
		{"bad request name", base("    requests:\n    - {name: GPU_0, exactly: {deviceClassName: gpu.nvidia.com}}\n"),
			`spec.devices.requests[0].name: Invalid value: "GPU_0"`},
		{"duplicate request", base("    requests:\n    - {name: gpu, exactly: {deviceClassName: a}}\n    - {name: gpu, exactly: {deviceClassName: b}}\n"),
			`spec.devices.requests[1].name: Duplicate value: "gpu"`},
		{"firstAvailable over 8", base(many), "spec.devices.requests[0].firstAvailable: Too many: 9: must have at most 8 items"},
		{"constraint names unknown request", base("    requests:\n    - {name: gpu, exactly: {deviceClassName: a}}\n    constraints:\n    - {requests: [nic], matchAttribute: skiff.dev/nvlinkDomain}\n"),
			`spec.devices.constraints[0].requests[0]: Invalid value: "nic": must be the name of a request in the claim`},
		{"constraint without attribute", base("    requests:\n    - {name: gpu, exactly: {deviceClassName: a}}\n    constraints:\n    - {requests: [gpu]}\n"),
			"spec.devices.constraints[0].matchAttribute: Required value"},
		{"CEL does not compile", base("    requests:\n    - {name: gpu, exactly: {deviceClassName: a, selectors: [{cel: {expression: \"device.driver ==\"}}]}}\n"),
			"spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value:"},
		{"CEL wrong type", base("    requests:\n    - {name: gpu, exactly: {deviceClassName: a, selectors: [{cel: {expression: \"device.driver\"}}]}}\n"),
			"must evaluate to bool"},
		{"CEL unknown field", base("    requests:\n    - {name: gpu, exactly: {deviceClassName: a, selectors: [{cel: {expression: \"device.vendor == 'x'\"}}]}}\n"),
			"undefined field 'vendor'"},
		{"opaque config needs JSON object", base("    requests:\n    - {name: gpu, exactly: {deviceClassName: a}}\n    config:\n    - {requests: [gpu], opaque: {driver: gpu.nvidia.com, parameters: [1]}}\n"),
			"spec.devices.config[0].opaque.parameters: Invalid value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := mustDecode(t, tc.yaml)
			SetDefaults(o)
			errs := Validate(o)
			if tc.want == "" {
				if len(errs) > 0 {
					t.Fatalf("unexpected errors: %v", errs)
				}
				return
			}
			if !strings.Contains(errs.Error(), tc.want) {
				t.Errorf("errors %q, want %q", errs.Error(), tc.want)
			}
		})
	}
}

func TestValidateResourceClaimStatusUpdate(t *testing.T) {
	claim := func() *ResourceClaim {
		c := mustDecode(t, "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c, namespace: default}\nspec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: a}}]}}\n").(*ResourceClaim)
		SetDefaults(c)
		return c
	}
	alloc := &AllocationResult{Devices: DeviceAllocationResult{Results: []DeviceRequestAllocationResult{{Request: "gpu", Driver: "gpu.nvidia.com", Pool: "node-1", Device: "gpu-0"}}}}
	pod := ResourceClaimConsumerReference{Resource: "pods", Name: "p", UID: "u1"}
	many := make([]ResourceClaimConsumerReference, 257)
	for i := range many {
		many[i] = ResourceClaimConsumerReference{Resource: "pods", Name: "p", UID: string(rune(0x4e00 + i))}
	}
	cases := []struct {
		name   string
		change func(n, o *ResourceClaim)
		want   string
	}{
		{"allocate and reserve", func(n, _ *ResourceClaim) {
			n.Status.Allocation, n.Status.ReservedFor = alloc, []ResourceClaimConsumerReference{pod}
		}, ""},
		{"reserve without allocation", func(n, _ *ResourceClaim) { n.Status.ReservedFor = []ResourceClaimConsumerReference{pod} },
			"status.reservedFor: Forbidden: may not be specified when `allocated` is not set"},
		{"result for an unknown request", func(n, _ *ResourceClaim) {
			a := *alloc
			a.Devices.Results = []DeviceRequestAllocationResult{{Request: "nic", Driver: "gpu.nvidia.com", Pool: "p", Device: "d"}}
			n.Status.Allocation = &a
		}, `status.allocation.devices.results[0].request: Invalid value: "nic"`},
		{"allocation changed", func(n, o *ResourceClaim) {
			o.Status.Allocation = alloc
			a := *alloc
			a.Devices.Results = []DeviceRequestAllocationResult{{Request: "gpu", Driver: "gpu.nvidia.com", Pool: "node-1", Device: "gpu-1"}}
			n.Status.Allocation = &a
		}, "status.allocation: Invalid value: \"<value omitted>\": field is immutable"},
		{"new consumer while deleting", func(n, o *ResourceClaim) {
			ts := Now()
			n.DeletionTimestamp, o.DeletionTimestamp = &ts, &ts
			o.Status.Allocation, n.Status.Allocation = alloc, alloc
			n.Status.ReservedFor = []ResourceClaimConsumerReference{pod}
		}, "status.reservedFor: Forbidden: new entries may not be added"},
		{"more than 256 consumers", func(n, _ *ResourceClaim) { n.Status.Allocation, n.Status.ReservedFor = alloc, many },
			"status.reservedFor: Too many: 257: must have at most 256 items"},
		{"spec immutable", func(n, _ *ResourceClaim) { n.Spec.Devices.Requests[0].Exactly.Count = 3 }, "spec: Invalid value: \"<value omitted>\": field is immutable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, o := claim(), claim()
			tc.change(n, o)
			errs := ValidateUpdate(n, o)
			if tc.want == "" {
				if len(errs) > 0 {
					t.Fatalf("unexpected: %v", errs)
				}
				return
			}
			if !strings.Contains(errs.Error(), tc.want) {
				t.Errorf("errors %q, want %q", errs.Error(), tc.want)
			}
		})
	}
}

func TestValidatePodResourceClaims(t *testing.T) {
	pod := func(claims, ctr string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec:\n  resourceClaims: " + claims +
			"\n  containers:\n  - {name: c, image: busybox, resources: {claims: " + ctr + "}}\n"
	}
	cases := []struct{ name, yaml, want string }{
		{"template", pod("[{name: gpu, resourceClaimTemplateName: single-gpu}]", "[{name: gpu}]"), ""},
		{"unknown claim", pod("[{name: gpu, resourceClaimName: c}]", "[{name: nic}]"),
			`spec.containers[0].resources.claims[0]: Not found: "nic": must be one of the names in pod.spec.resourceClaims`},
		{"both sources", pod("[{name: gpu, resourceClaimName: c, resourceClaimTemplateName: t}]", "[]"),
			"at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified"},
		{"no source", pod("[{name: gpu}]", "[]"), "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := Validate(mustDecode(t, tc.yaml))
			if tc.want == "" && len(errs) > 0 || tc.want != "" && !strings.Contains(errs.Error(), tc.want) {
				t.Errorf("errors %v, want %q", errs, tc.want)
			}
		})
	}
}

func TestValidateResourceSlice(t *testing.T) {
	const slice = `apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-1-gpu.nvidia.com}
spec:
  driver: gpu.nvidia.com
  nodeName: node-1
  pool: {name: node-1, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes:
      type: {string: gpu}
      driverVersion: {version: "%s"}
      skiff.dev/nvlinkDomain: {string: nvl-0}
    capacity:
      memory: {value: 80Gi}
`
	for _, tc := range []struct{ version, want string }{
		{"550.54.15", ""},
		{"550.54", `spec.devices[0].attributes[driverVersion].version: Invalid value: "550.54": must be a string compatible with semver.org spec 2.0.0`},
	} {
		errs := Validate(mustDecode(t, strings.Replace(slice, "%s", tc.version, 1)))
		if tc.want == "" && len(errs) > 0 || tc.want != "" && !strings.Contains(errs.Error(), tc.want) {
			t.Errorf("version %s: errors %v, want %q", tc.version, errs, tc.want)
		}
	}
	// An unsupported field is refused with its path.
	_, _, err := DecodeAny([]byte(strings.Replace(slice, "%s", "1.0.0", 1) + "  perDeviceNodeSelection: true\n"))
	if err == nil || !strings.Contains(err.Error(), "spec.perDeviceNodeSelection: field not supported by skiff") {
		t.Errorf("perDeviceNodeSelection: %v", err)
	}
}

// Partitionable devices (KEP-4815): a pool's counters in one slice, its
// devices consuming them in another; Kubernetes' checks and words.
func TestValidateResourceSliceCounters(t *testing.T) {
	const counters = `apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-1-gpu.nvidia.com-counters}
spec:
  driver: gpu.nvidia.com
  nodeName: node-1
  pool: {name: node-1, generation: 1, resourceSliceCount: 2}
  sharedCounters:
  - name: gpu-0-counters
    counters:
      memory-slices: {value: "8"}
      multiprocessors: {value: "98"}
`
	const devices = `apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-1-gpu.nvidia.com-devices}
spec:
  driver: gpu.nvidia.com
  nodeName: node-1
  pool: {name: node-1, generation: 1, resourceSliceCount: 2}
  devices:
  - name: gpu-0-mig-4g-0
    attributes:
      profile: {string: 4g.20gb}
    consumesCounters:
    - counterSet: gpu-0-counters
      counters:
        memory-slices: {value: "4"}
`
	for _, tc := range []struct{ name, yaml, want string }{
		{"counters", counters, ""},
		{"devices", devices, ""},
		{"both in one slice", counters + "  devices:\n  - name: gpu-0\n", "spec: Invalid value: \"\": only one of `sharedCounters` or `devices` is allowed"},
		{"duplicate set", counters + "  - name: gpu-0-counters\n    counters:\n      memory-slices: {value: \"8\"}\n", `spec.sharedCounters[1]: Duplicate value: "gpu-0-counters"`},
		{"set without counters", strings.Replace(counters, "    counters:\n      memory-slices: {value: \"8\"}\n      multiprocessors: {value: \"98\"}\n", "", 1), "spec.sharedCounters[0].counters: Required value"},
		{"bad counter name", strings.Replace(counters, "memory-slices:", "Memory_Slices:", 1), "spec.sharedCounters[0].counters[Memory_Slices]: Invalid value"},
		{"consumption without a set", strings.Replace(devices, "    - counterSet: gpu-0-counters\n", "    - counterSet: \"\"\n", 1), "spec.devices[0].consumesCounters[0].counterSet: Required value"},
		{"three consumptions", devices + strings.Repeat("    - counterSet: x\n      counters: {a: {value: \"1\"}}\n", 2), "spec.devices[0].consumesCounters: Too many: 3: must have at most 2 items"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := Validate(mustDecode(t, tc.yaml))
			if tc.want == "" && len(errs) > 0 || tc.want != "" && !strings.Contains(errs.Error(), tc.want) {
				t.Errorf("errors %v, want %q", errs, tc.want)
			}
		})
	}
}
