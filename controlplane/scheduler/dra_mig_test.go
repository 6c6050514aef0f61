package scheduler

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"skiff.dev/skiff/api"
)

// migPool is the pool the agent's gpu.nvidia.com driver publishes with
// DynamicMIG on a simulated DGX A100 (its golden file, cut to GPUs 0 and
// 1): a counter set per GPU, the whole GPU and every MIG placement
// consuming it. It returns the slices and each device's memory slices.
func migPool(t *testing.T) ([]api.Object, map[string][]int) {
	t.Helper()
	b, err := os.ReadFile("../../agent/dra/gpudriver/testdata/dgxa100-dynamic-mig.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var specs []api.ResourceSliceSpec
	if err := yaml.Unmarshal(b, &specs); err != nil {
		t.Fatal(err)
	}
	var out []api.Object
	mem := map[string][]int{}
	for i, s := range specs {
		out = append(out, &api.ResourceSlice{ObjectMeta: api.ObjectMeta{Name: fmt.Sprintf("n1-gpu.nvidia.com-%d", i)}, Spec: s})
		for _, d := range s.Devices {
			for _, cc := range d.ConsumesCounters {
				for name := range cc.Counters {
					var n int
					if _, err := fmt.Sscanf(name, "memory-slice-%d", &n); err == nil {
						mem[d.Name] = append(mem[d.Name], n)
					}
				}
			}
		}
	}
	return out, mem
}

// gpuOf is the GPU (gpu-N) of a device name (gpu-N or gpu-N-mig-...).
func gpuOf(dev string) string {
	g, _, _ := strings.Cut(dev, "-mig-")
	return g
}

// noOverlap fails when two of the allocated devices take one memory slice
// of one GPU (a whole GPU takes them all).
func noOverlap(t *testing.T, mem map[string][]int, devices []string) {
	t.Helper()
	taken := map[string]string{}
	for _, dev := range devices {
		for _, s := range mem[dev] {
			key := fmt.Sprintf("%s/%d", gpuOf(dev), s)
			if other, ok := taken[key]; ok {
				t.Errorf("%s and %s both take memory slice %d of %s", other, dev, s, gpuOf(dev))
			}
			taken[key] = dev
		}
	}
}

func profileIs(p string) reqOpt {
	return selector("device.attributes['gpu.nvidia.com'].profile == '" + p + "'")
}

// Kubernetes' allocator over the driver's partitionable MIG devices:
// NVIDIA's gpu-test4 claim (1g.5gb, 1g.5gb, 2g.10gb, 3g.20gb on one
// parentUUID) gets four placements of one GPU that fit together; a whole
// GPU and seven 1g.5gb claims fill two GPUs, and an eighth 1g.5gb finds
// no memory slice left.
func TestDynamicMIGAllocation(t *testing.T) {
	pool, mem := migPool(t)
	if len(mem["gpu-0"]) != 8 || len(mem["gpu-1-mig-3g20gb-9-4"]) != 4 {
		t.Fatalf("golden pool: gpu-0 takes memory slices %v, gpu-1-mig-3g20gb-9-4 %v", mem["gpu-0"], mem["gpu-1-mig-3g20gb-9-4"])
	}
	objs := append(pool, gpuNode("n1", 0), gpuClass(), api.NVIDIAMIGDeviceClass())
	t.Run("gpu-test4", func(t *testing.T) {
		c := gpuClaim("mig-devices")
		c.Spec.Devices.Requests = nil
		profiles := map[string]string{"mig-1g-5gb-0": "1g.5gb", "mig-1g-5gb-1": "1g.5gb", "mig-2g-10gb": "2g.10gb", "mig-3g-20gb": "3g.20gb"}
		for _, name := range []string{"mig-1g-5gb-0", "mig-1g-5gb-1", "mig-2g-10gb", "mig-3g-20gb"} {
			req := api.DeviceRequest{Name: name, Exactly: &api.ExactDeviceRequest{DeviceClassName: api.NVIDIAMIGDeviceClassName, AllocationMode: api.DeviceAllocationModeExactCount, Count: 1}}
			profileIs(profiles[name])(&req)
			c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, req)
		}
		parent := "gpu.nvidia.com/parentUUID"
		c.Spec.Devices.Constraints = []api.DeviceConstraint{{Requests: []string{}, MatchAttribute: &parent}}
		f := newDRAFixture(t, append(objs, c)...)
		f.add(claimPodFor("pod", "mig-devices"))
		if res := f.step(); res == nil || res.SelectedNode != "n1" {
			t.Fatalf("result %+v, want placed on n1", res)
		}
		var devs []string
		for _, r := range f.claim("mig-devices").Status.Allocation.Devices.Results {
			devs = append(devs, r.Device)
			if !strings.Contains(r.Device, "-mig-"+strings.ReplaceAll(profiles[r.Request], ".", "")+"-") {
				t.Errorf("request %s (%s) got %s", r.Request, profiles[r.Request], r.Device)
			}
		}
		if len(devs) != 4 || gpuOf(devs[0]) != gpuOf(devs[1]) || gpuOf(devs[0]) != gpuOf(devs[2]) || gpuOf(devs[0]) != gpuOf(devs[3]) {
			t.Errorf("allocated %v, want four MIG devices of one GPU", devs)
		}
		noOverlap(t, mem, devs)
	})
	t.Run("fill two GPUs", func(t *testing.T) {
		claims := []api.Object{gpuClaim("whole")}
		for i := range 8 {
			claims = append(claims, gpuClaim(fmt.Sprintf("mig-%d", i), class(api.NVIDIAMIGDeviceClassName), profileIs("1g.5gb")))
		}
		f := newDRAFixture(t, append(objs, claims...)...)
		// One pod at a time: each cycle sees the allocations before it.
		place := func(claim string) *CycleResult {
			t.Helper()
			f.add(claimPodFor("pod-"+claim, claim))
			return f.step()
		}
		if res := place("whole"); res == nil || res.SelectedNode != "n1" {
			t.Fatalf("whole GPU: %+v", res)
		}
		devs := []string{f.claim("whole").Status.Allocation.Devices.Results[0].Device}
		for i := range 7 {
			name := fmt.Sprintf("mig-%d", i)
			if res := place(name); res == nil || res.SelectedNode != "n1" {
				t.Fatalf("1g.5gb claim %d: %+v", i, res)
			}
			devs = append(devs, f.claim(name).Status.Allocation.Devices.Results[0].Device)
		}
		noOverlap(t, mem, devs)
		for _, d := range devs[1:] {
			if gpuOf(d) == devs[0] {
				t.Errorf("MIG device %s on %s, the whole GPU a claim holds", d, devs[0])
			}
		}
		res := place("mig-7")
		if res == nil || res.SelectedNode != "" || res.Message != "0/1 nodes are available: 1 cannot allocate all claims." {
			t.Errorf("an eighth 1g.5gb: %+v, want unschedulable", res)
		}
		if c := f.claim("mig-7"); c.Status.Allocation != nil {
			t.Errorf("allocated %v", allocatedDevices(c))
		}
	})
}
