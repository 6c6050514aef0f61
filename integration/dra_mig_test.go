package integration

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/agent/dra/gpudriver"
	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/testwait"
)

// Dynamic MIG (issue 22: MIG devices as partitionable devices), a subtest
// of TestDRAOnSimulatedDGXA100: the agent restarted with
// --dra-dynamic-mig publishes each A100 as a counter set and its MIG
// placements; examples/dra/mig-1g5gb.yaml's two pods (a 1g.5gb claim
// each, DeviceClass mig.nvidia.com) run, each nvidia-smi -L showing its
// own MIG device, at placements that do not overlap; deleting them
// destroys the MIG devices.

var migLineRe = regexp.MustCompile(`MIG 1g\.5gb +Device +\d+: \(UUID: (MIG-[0-9a-f-]+)\)`)

func draDynamicMIG(t *testing.T, g *gpuCluster, pluginTook time.Duration) {
	c, ctx, ns := g.c, context.Background(), "mig-test"
	start := time.Now()
	g.agent.kill(t)
	g.dynamicMIG = true
	g.gpuStartAgent(t)
	base := gpudriver.SliceName(gpuNode)
	// The node is ready again for MIG claims when its whole pool is
	// published: gpu-0's slice with its placements and every other slice
	// of that generation (the counter slice, the other GPUs'). A pod
	// applied before then is turned away ("cannot allocate all claims":
	// the allocator skips an incomplete pool) and waits out its backoff;
	// that is the restart's settle, not the pods', so it is timed apart.
	testwait.Until(t, 20*time.Second, func() (bool, string) {
		s, err := client.Get[*api.ResourceSlice](ctx, c, "", base+"-gpu-0")
		if err != nil {
			return false, err.Error()
		}
		pool := s.Spec.Pool
		if len(s.Spec.Devices) != 26 || pool.ResourceSliceCount != 10 {
			return false, fmt.Sprintf("gpu-0: %d devices, pool %+v", len(s.Spec.Devices), pool)
		}
		all, _, err := client.List[*api.ResourceSlice](ctx, c, "", api.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, o := range all {
			if o.Spec.Driver == gpudriver.DriverName && o.Spec.Pool.Name == pool.Name && o.Spec.Pool.Generation == pool.Generation {
				n++
			}
		}
		return int64(n) == pool.ResourceSliceCount, fmt.Sprintf("%d of the pool's %d slices at generation %d", n, pool.ResourceSliceCount, pool.Generation)
	})
	t.Logf("agent restarted with --dra-dynamic-mig, node ready again (the whole pool of partitions published): %v", time.Since(start).Round(time.Millisecond))

	applied := time.Now()
	g.cli(t, "apply", "-f", "../examples/dra/mig-1g5gb.yaml")
	draWaitPhase(t, c, ns, "pod1", api.PodRunning, 30*time.Second)
	draWaitPhase(t, c, ns, "pod2", api.PodRunning, 30*time.Second)
	took := time.Since(applied)
	if pluginTook > 0 {
		t.Logf("apply → Running (from the node ready again): mig-1g5gb pod1 and pod2 (a MIG device created for each claim) %v, device-plugin GPU pod %v, ratio %.2f",
			took.Round(time.Millisecond), pluginTook.Round(time.Millisecond), took.Seconds()/pluginTook.Seconds())
	} else {
		t.Logf("apply → Running (from the node ready again): mig-1g5gb pod1 and pod2 (a MIG device created for each claim) %v; device-plugin GPU pod not measured (its subtest did not run)", took.Round(time.Millisecond))
	}
	claims := draClaims(t, c, ns)
	if len(claims) != 2 {
		t.Fatalf("%d claims in %s, want 2", len(claims), ns)
	}
	devOf, migOf := map[string]string{}, map[string]string{}
	for _, cl := range claims {
		if cl.Status.Allocation == nil || len(cl.Status.Allocation.Devices.Results) != 1 || len(cl.Status.ReservedFor) != 1 {
			t.Fatalf("claim %s: allocation %+v reservedFor %v", cl.Name, cl.Status.Allocation, cl.Status.ReservedFor)
		}
		pod, dev := cl.Status.ReservedFor[0].Name, cl.Status.Allocation.Devices.Results[0].Device
		if !strings.Contains(dev, "-mig-1g5gb-19-") {
			t.Errorf("claim %s: device %s, want a 1g.5gb placement", cl.Name, dev)
		}
		devOf[pod] = dev
		out := draLogsUntil(t, c, ns, pod, "", "MIG 1g.5gb")
		m := migLineRe.FindAllStringSubmatch(out, -1)
		if len(m) != 1 || strings.Count(out, "GPU-") != 1 {
			t.Errorf("pod %s: nvidia-smi -L shows %d MIG devices under %d GPUs, want exactly one 1g.5gb:\n%s", pod, len(m), strings.Count(out, "GPU-"), out)
			continue
		}
		migOf[pod] = m[0][1]
	}
	if devOf["pod1"] == devOf["pod2"] || migOf["pod1"] == "" || migOf["pod1"] == migOf["pod2"] {
		t.Errorf("pod1 has %s (%s), pod2 %s (%s): want two placements, two MIG devices", devOf["pod1"], migOf["pod1"], devOf["pod2"], migOf["pod2"])
	}
	prepared := draPrepared(t, g)
	for pod, uuid := range migOf {
		if !strings.HasPrefix(prepared[uuid], ns+"/") {
			t.Errorf("MIG device %s of %s prepared for %q (checkpoint %v)", uuid, pod, prepared[uuid], prepared)
		}
	}
	if n := len(simMIGDevices(t, g)); n != 2 {
		t.Errorf("the simulated GPUs have %d MIG devices, want the two claims'", n)
	}
	draDeleteNamespace(t, g, ns)
	if left := simMIGDevices(t, g); len(left) != 0 {
		t.Errorf("MIG devices left after the claims were unprepared: %v", left)
	}
	t.Logf("dynamic MIG subtest: %v", time.Since(start).Round(time.Millisecond))
}

// simMIGDevices lists the MIG devices of the agent's simulated GPUs.
func simMIGDevices(t *testing.T, g *gpuCluster) []string {
	t.Helper()
	all, err := g.agent.node.GPUs().Source.(gpu.MIGSource).MIGDevices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i, devs := range all {
		for _, m := range devs {
			out = append(out, fmt.Sprintf("GPU %d %s@%d %s", i, m.Profile, m.Start, m.UUID))
		}
	}
	return out
}
