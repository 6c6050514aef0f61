package apiserver

import (
	"path/filepath"
	"strings"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/internal/kubectltest"
)

// The real kubectl with DRA (resource.k8s.io): NVIDIA's quick-start
// ResourceClaimTemplate and DeviceClass applied unchanged, a v1 claim and a
// v1beta1-shaped one (served with the deprecation warning), get
// resourceclaims STATE from pending to allocated,reserved after a status
// write, get resourceslices and deviceclasses columns, explain of the
// requests, and a selector whose CEL does not compile refused naming the
// claim, the request and the selector.
func TestKubectlDRA(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := kubectltest.Serve(t, e.srv.Handler(), testToken)
	header := func(out string) string { return strings.Join(strings.Fields(strings.SplitN(out, "\n", 2)[0]), " ") }
	rows := func(out string) map[string][]string {
		r := map[string][]string{}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			f := strings.Fields(l)
			r[f[0]] = f[1:]
		}
		return r
	}

	const class = `apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: gpu.nvidia.com
spec:
  selectors:
  - cel:
      expression: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
`
	const template = `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  namespace: default
  name: single-gpu
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
`
	const claim = `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  namespace: default
  name: gpu-claim
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
`
	const claimV1beta1 = `apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaim
metadata:
  namespace: default
  name: old-claim
spec:
  devices:
    requests:
    - name: gpu
      deviceClassName: gpu.nvidia.com
`
	for _, tc := range []struct{ yaml, want string }{
		{class, "deviceclass.resource.k8s.io/gpu.nvidia.com created"},
		{template, "resourceclaimtemplate.resource.k8s.io/single-gpu created"},
		{claim, "resourceclaim.resource.k8s.io/gpu-claim created"},
	} {
		if out := c.Must(t, tc.yaml, "apply", "-f", "-"); !strings.Contains(out, tc.want) {
			t.Fatalf("apply: %s, want %q", out, tc.want)
		}
	}
	// Applied again: the stored requests list has the defaults
	// (allocationMode ExactCount, count 1), so kubectl's patch carries the
	// whole (atomic) list and it says "configured", as against
	// kube-apiserver; the server sees no change and writes nothing.
	rv := c.Must(t, "", "get", "resourceclaimtemplate", "single-gpu", "-o", "jsonpath={.metadata.resourceVersion}")
	if out := c.Must(t, template, "apply", "-f", "-"); !strings.Contains(out, "resourceclaimtemplate.resource.k8s.io/single-gpu") {
		t.Errorf("second apply of the template: %s", out)
	}
	if again := c.Must(t, "", "get", "resourceclaimtemplate", "single-gpu", "-o", "jsonpath={.metadata.resourceVersion}"); again != rv {
		t.Errorf("applying the same template again wrote it: resourceVersion %s → %s", rv, again)
	}
	old := c.Run(t, claimV1beta1, "apply", "-f", "-")
	if old.Err != nil || !strings.Contains(old.Stdout, "resourceclaim.resource.k8s.io/old-claim created") {
		t.Fatalf("v1beta1 claim: err %v\n%s\n%s", old.Err, old.Stdout, old.Stderr)
	}
	if !strings.Contains(old.Stderr, "Warning: resource.k8s.io/v1beta1 ResourceClaim is deprecated") {
		t.Errorf("v1beta1 claim: no deprecation warning in %q", old.Stderr)
	}
	// Stored as v1: the request's fields moved under exactly.
	if out := c.Must(t, "", "get", "resourceclaim", "old-claim", "-o", "jsonpath={.apiVersion} {.spec.devices.requests[0].exactly.deviceClassName}"); out != "resource.k8s.io/v1 gpu.nvidia.com" {
		t.Errorf("v1beta1 claim read back: %q", out)
	}

	out := c.Must(t, "", "get", "resourceclaims")
	if got := header(out); got != "NAME STATE AGE" {
		t.Fatalf("get resourceclaims header %q", got)
	}
	if r := rows(out); len(r) != 2 || r["gpu-claim"][0] != "pending" || r["old-claim"][0] != "pending" {
		t.Errorf("get resourceclaims rows %q, want both pending", r)
	}
	if out := c.Must(t, "", "get", "resourceclaimtemplates"); header(out) != "NAME AGE" || rows(out)["single-gpu"] == nil {
		t.Errorf("get resourceclaimtemplates:\n%s", out)
	}

	// What the scheduler's PreBind writes: the allocation and the pod in reservedFor.
	status := `{"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.nvidia.com","pool":"node-1","device":"gpu-0"}]}},` +
		`"reservedFor":[{"resource":"pods","name":"pod0","uid":"3f0c7a56-1b7e-4d0e-9a8e-1c2f4b7d9e01"}]}}`
	c.Must(t, "", "patch", "resourceclaim", "gpu-claim", "--subresource=status", "--type=merge", "-p", status)
	if r := rows(c.Must(t, "", "get", "resourceclaims")); r["gpu-claim"][0] != "allocated,reserved" || r["old-claim"][0] != "pending" {
		t.Errorf("after the status write: %q, want gpu-claim allocated,reserved", r)
	}

	// A node's slice, as the gpu.nvidia.com driver publishes it.
	node, gpu, uuid := "node-1", "gpu", "GPU-8e9d2c1a-0000-0000-0000-000000000000"
	slice := &api.ResourceSlice{ObjectMeta: api.ObjectMeta{Name: "node-1-gpu.nvidia.com-x7k2p"}, Spec: api.ResourceSliceSpec{
		Driver: "gpu.nvidia.com", NodeName: &node, Pool: api.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
		Devices: []api.Device{{Name: "gpu-0", Attributes: map[string]api.DeviceAttribute{"type": {StringValue: &gpu}, "uuid": {StringValue: &uuid}}}}}}
	if _, err := e.local.Create(t.Context(), slice); err != nil {
		t.Fatal(err)
	}
	out = c.Must(t, "", "get", "resourceslices")
	if got := header(out); got != "NAME NODE DRIVER POOL AGE" {
		t.Fatalf("get resourceslices header %q", got)
	}
	if r := rows(out)["node-1-gpu.nvidia.com-x7k2p"]; len(r) != 4 || strings.Join(r[:3], " ") != "node-1 gpu.nvidia.com node-1" {
		t.Errorf("get resourceslices row %q", r)
	}
	out = c.Must(t, "", "get", "deviceclasses")
	if got := header(out); got != "NAME AGE" || rows(out)["gpu.nvidia.com"] == nil {
		t.Errorf("get deviceclasses:\n%s", out)
	}

	out = c.Must(t, "", "explain", "resourceclaim.spec.devices.requests")
	for _, want := range []string{"GROUP:      resource.k8s.io", "VERSION:    v1", "FIELD: requests <[]DeviceRequest>", "exactly\t<ExactDeviceRequest>", "firstAvailable\t<[]DeviceSubRequest>", "name\t<string> -required-"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}

	bad := strings.NewReplacer("name: gpu-claim", "name: bad-selector", "        deviceClassName: gpu.nvidia.com",
		"        deviceClassName: gpu.nvidia.com\n        selectors:\n        - cel:\n            expression: device.attributes['gpu.nvidia.com'].productName ==").Replace(claim)
	res := c.Run(t, bad, "apply", "-f", "-")
	if res.Err == nil {
		t.Fatalf("a selector that does not compile was accepted: %s", res.Stdout)
	}
	for _, want := range []string{`The ResourceClaim "bad-selector" is invalid: spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: "device.attributes['gpu.nvidia.com'].productName ==": compilation failed: ERROR: <input>:1:51: Syntax error`, "spec.devices.requests[0].exactly.selectors[0].cel.expression", "compilation failed"} {
		if !strings.Contains(res.Stderr, want) {
			t.Errorf("refusal lacks %q:\n%s", want, res.Stderr)
		}
	}
	if r := c.Run(t, "", "get", "resourceclaim", "bad-selector"); r.Err == nil {
		t.Error("the refused claim was stored")
	}

	// NVIDIA's quick-start gpu-test3 (one claim, two pods) and gpu-test5
	// (opaque GpuConfig parameters) applied unchanged; the opaque
	// parameters come back as written.
	for file, want := range map[string][]string{
		"gpu-test3.yaml": {"namespace/gpu-test3 created", "resourceclaim.resource.k8s.io/single-gpu created", "pod/pod1 created", "pod/pod2 created"},
		"gpu-test5.yaml": {"namespace/gpu-test5 created", "resourceclaimtemplate.resource.k8s.io/multiple-gpus created", "pod/pod0 created"},
	} {
		path, err := filepath.Abs(filepath.Join("..", "..", "examples", "dra", file))
		if err != nil {
			t.Fatal(err)
		}
		out := c.Must(t, "", "apply", "-f", path)
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("kubectl apply -f %s: no %q in\n%s", file, w, out)
			}
		}
	}
	if out := c.Must(t, "", "get", "resourceclaimtemplate", "multiple-gpus", "-n", "gpu-test5", "-o",
		"jsonpath={.spec.spec.devices.config[0].opaque.parameters.sharing.timeSlicingConfig.interval} {.spec.spec.devices.config[1].opaque.parameters.sharing.mpsConfig.defaultPinnedDeviceMemoryLimit}"); out != "Long 10Gi" {
		t.Errorf("gpu-test5's GpuConfigs read back: %q, want \"Long 10Gi\"", out)
	}
}
