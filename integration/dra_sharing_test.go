package integration

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/testenv"
	"skiff.dev/skiff/internal/testwait"
	"skiff.dev/skiff/runtime"
)

// DRA sharing (issue 22), subtests of TestDRAOnSimulatedDGXA100: NVIDIA's
// quick-start gpu-test3 (one claim, two pods) and gpu-test5 (a
// TimeSlicing and an MPS GpuConfig), applied unchanged, and a GpuConfig
// NVIDIA's driver refuses.

// quickStartImages are the images NVIDIA's quick start names: ubuntu
// (bash, nvidia-smi from the GPU's CDI device) and the CUDA nbody
// sample, whose /tmp/sample stands in for nbody: it prints what CUDA
// would see (the GPU, the MPS variables) and holds a full load on the
// container's GPUs with gpu-load (capped by the MPS percentage).
func quickStartImages(t *testing.T, rt runtime.Runtime) {
	t.Helper()
	img := testenv.CUDAStandIn("docker.io/library/ubuntu:22.04", "nvcr.io/nvidia/k8s/cuda-sample:nbody-cuda11.6.0-ubuntu18.04")
	img.Executables["/tmp/sample"] = `#!/bin/sh
# nbody stand-in: what CUDA would see, then a full load until stopped
echo "nbody stand-in: $*"
nvidia-smi -L
env | grep -E '^(CUDA_MPS_|DRA_CLAIM_)' | sort
exec gpu-load --util 100
`
	arch, err := img.Archive()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.ImportImage(context.Background(), bytes.NewReader(arch)); err != nil {
		t.Fatalf("import the quick start's images: %v", err)
	}
}

var gpuUUIDRe = regexp.MustCompile(`GPU-[0-9a-f-]{36}`)

// gpuUUIDsIn lists the GPU UUIDs a log names, each once, joined by ",".
func gpuUUIDsIn(out string) string {
	u := gpuUUIDRe.FindAllString(out, -1)
	slices.Sort(u)
	return strings.Join(slices.Compact(u), ",")
}

// draLogsUntil waits until the container's log contains want.
func draLogsUntil(t *testing.T, c *client.Client, ns, pod, container, want string) string {
	t.Helper()
	var out string
	testwait.Until(t, 15*time.Second, func() (bool, string) {
		out = draLogs(t, c, ns, pod, container)
		return strings.Contains(out, want), out
	})
	return out
}

func draSharedClaim(t *testing.T, g *gpuCluster, pluginTook time.Duration) {
	c, ctx, ns := g.c, context.Background(), "gpu-test3"
	start := time.Now()
	g.cli(t, "apply", "-f", "../examples/dra/gpu-test3.yaml")
	draWaitPhase(t, c, ns, "pod1", api.PodRunning, 30*time.Second)
	draWaitPhase(t, c, ns, "pod2", api.PodRunning, 30*time.Second)
	took := time.Since(start)
	t.Logf("apply → Running: gpu-test3 pod1 and pod2 (one shared ResourceClaim) %v, device-plugin GPU pod %v, ratio %.2f",
		took.Round(time.Millisecond), pluginTook.Round(time.Millisecond), took.Seconds()/pluginTook.Seconds())
	cl, err := client.Get[*api.ResourceClaim](ctx, c, ns, "single-gpu")
	if err != nil {
		t.Fatal(err)
	}
	var consumers []string
	for _, r := range cl.Status.ReservedFor {
		consumers = append(consumers, r.Name)
	}
	slices.Sort(consumers)
	if !slices.Equal(consumers, []string{"pod1", "pod2"}) || cl.Status.Allocation == nil || len(cl.Status.Allocation.Devices.Results) != 1 {
		t.Fatalf("claim single-gpu: reservedFor %v, allocation %+v; want pod1 and pod2 on one device", consumers, cl.Status.Allocation)
	}
	var uuids []string
	for _, p := range []string{"pod1", "pod2"} {
		out := draLogs(t, c, ns, p, "")
		uuids = append(uuids, gpuUUIDsIn(out))
	}
	if uuids[0] == "" || strings.Contains(uuids[0], ",") || uuids[0] != uuids[1] {
		t.Errorf("nvidia-smi -L in pod1 and pod2: %q, want the same one GPU", uuids)
	}
	claimOf := func() string { return draPrepared(t, g)[uuids[0]] }
	if got := claimOf(); got != ns+"/single-gpu" {
		t.Errorf("GPU %s prepared for %q, want %s/single-gpu (once: draPrepared refuses a GPU prepared twice)", uuids[0], got, ns)
	}
	if out := g.cli(t, "get", "resourceclaim", "single-gpu", "-n", ns); !strings.Contains(out, "allocated,reserved") {
		t.Errorf("get resourceclaim:\n%s", out)
	}
	// pod1 goes: pod2 still holds the claim, which stays prepared.
	g.cli(t, "delete", "pod", "pod1", "-n", ns)
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		cl, err := client.Get[*api.ResourceClaim](ctx, c, ns, "single-gpu")
		if err != nil {
			return false, err.Error()
		}
		_, perr := client.Get[*api.Pod](ctx, c, ns, "pod1")
		return len(cl.Status.ReservedFor) == 1 && cl.Status.ReservedFor[0].Name == "pod2" && api.IsNotFound(perr),
			fmt.Sprintf("reservedFor %v, pod1: %v", cl.Status.ReservedFor, perr)
	})
	if got := claimOf(); got != ns+"/single-gpu" {
		t.Errorf("after pod1 ended the GPU is prepared for %q, want still %s/single-gpu (pod2 uses it)", got, ns)
	}
	// pod2, the last consumer, goes: the node unprepares the claim.
	g.cli(t, "delete", "pod", "pod2", "-n", ns)
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		cl, err := client.Get[*api.ResourceClaim](ctx, c, ns, "single-gpu")
		if err != nil {
			return false, err.Error()
		}
		return len(cl.Status.ReservedFor) == 0 && claimOf() == "", fmt.Sprintf("reservedFor %v, prepared %v", cl.Status.ReservedFor, draPrepared(t, g))
	})
	draDeleteNamespace(t, g, ns)
}

func draGpuConfig(t *testing.T, g *gpuCluster) {
	c, ns := g.c, "gpu-test5"
	g.cli(t, "apply", "-f", "../examples/dra/gpu-test5.yaml")
	draWaitPhase(t, c, ns, "pod0", api.PodRunning, 30*time.Second)
	logs := map[string]string{}
	for _, ctr := range []string{"ts-ctr0", "ts-ctr1", "mps-ctr0", "mps-ctr1"} {
		logs[ctr] = draLogsUntil(t, c, ns, "pod0", ctr, "of the SMs")
	}
	uuid := func(ctr string) string { return gpuUUIDsIn(logs[ctr]) }
	ts, mps := uuid("ts-ctr0"), uuid("mps-ctr0")
	if ts == "" || strings.Contains(ts, ",") || uuid("ts-ctr1") != ts || mps == "" || strings.Contains(mps, ",") || uuid("mps-ctr1") != mps || ts == mps {
		t.Errorf("GPUs: ts-ctr0 %q ts-ctr1 %q mps-ctr0 %q mps-ctr1 %q; want one GPU per request, shared by its two containers", ts, uuid("ts-ctr1"), mps, uuid("mps-ctr1"))
	}
	for _, ctr := range []string{"ts-ctr0", "ts-ctr1"} {
		if !regexp.MustCompile(`DRA_CLAIM_GPU_\d+_SHARING=TimeSlicing/Long`).MatchString(logs[ctr]) || strings.Contains(logs[ctr], "CUDA_MPS_") {
			t.Errorf("%s: want time-slicing at Long and no MPS variables:\n%s", ctr, logs[ctr])
		}
	}
	for _, ctr := range []string{"mps-ctr0", "mps-ctr1"} {
		for _, want := range []string{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=10240M", "CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps", "_SHARING=MPS", "50% of the SMs"} {
			if !strings.Contains(logs[ctr], want) {
				t.Errorf("%s: no %q:\n%s", ctr, want, logs[ctr])
			}
		}
	}
	draDeleteNamespace(t, g, ns)
}

// draGpuConfigRefused: a GpuConfig NVIDIA's driver refuses fails the
// pod's prepare with its words (a FailedPrepareDynamicResources event);
// the node prepares nothing.
func draGpuConfigRefused(t *testing.T, g *gpuCluster) {
	c, ctx := g.c, context.Background()
	const doc = `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  namespace: ` + gpuNS + `
  name: bad-sharing
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
    config:
    - requests: ["gpu"]
      opaque:
        driver: gpu.nvidia.com
        parameters:
          apiVersion: resource.nvidia.com/v1beta1
          kind: GpuConfig
          sharing:
            strategy: SpaceSlicing
---
apiVersion: v1
kind: Pod
metadata:
  namespace: ` + gpuNS + `
  name: bad-sharing
spec:
  containers:
  - name: ctr
    image: ` + gpuImage + `
    command: ["sh", "-c", "nvidia-smi -L; sleep 9999"]
    resources:
      claims:
      - name: gpu
  resourceClaims:
  - name: gpu
    resourceClaimName: bad-sharing
`
	before := draPrepared(t, g)
	applyDoc(t, g, doc)
	const words = "prepare devices failed: error validating GPU config: unknown GPU sharing strategy: SpaceSlicing, supported GPU sharing strategies: TimeSlicing, MPS"
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		var seen []string
		for _, ev := range eventsFor(t, c, gpuNS, "bad-sharing") {
			if ev.Reason == "FailedPrepareDynamicResources" && strings.Contains(ev.Message, words) &&
				strings.Contains(ev.Message, "error preparing devices for claim "+gpuNS+"/bad-sharing:") {
				return true, ""
			}
			seen = append(seen, ev.Reason+": "+ev.Message)
		}
		return false, fmt.Sprintf("no FailedPrepareDynamicResources event with %q: %q", words, seen)
	})
	if p, err := client.Get[*api.Pod](ctx, c, gpuNS, "bad-sharing"); err != nil || p.Status.Phase != api.PodPending {
		t.Errorf("pod with a refused config: %v %s, want Pending", err, podSummary([]*api.Pod{p}))
	}
	if after := draPrepared(t, g); len(after) != len(before) {
		t.Errorf("prepared %v before, %v after a refused config", before, after)
	}
	g.cli(t, "delete", "pod", "bad-sharing")
	g.cli(t, "delete", "resourceclaim", "bad-sharing")
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		_, err := client.Get[*api.ResourceClaim](ctx, c, gpuNS, "bad-sharing")
		return api.IsNotFound(err), fmt.Sprintf("claim: %v", err)
	})
}

// draDeleteNamespace deletes ns and waits until its claims are gone and
// the node prepared none.
func draDeleteNamespace(t *testing.T, g *gpuCluster, ns string) {
	t.Helper()
	g.cli(t, "delete", "namespace", ns)
	testwait.Until(t, 60*time.Second, func() (bool, string) {
		left := draClaims(t, g.c, ns)
		return len(left) == 0 && len(draPrepared(t, g)) == 0, fmt.Sprintf("%d claims left, prepared %v", len(left), draPrepared(t, g))
	})
}
