package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/agent/dra/gpudriver"
	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/gputopology"
	"skiff.dev/skiff/client/fake"
)

func TestDescribeDRAKinds(t *testing.T) {
	node := "dgx-1"
	gpus := []gpu.Device{{Index: 0, MinorNumber: 0, UUID: "GPU-0", Name: "NVIDIA A100-SXM4-40GB", MemoryMiB: 40960, Family: "ampere", ComputeMajor: 8, Healthy: true, PCIBusID: "00000000:07:00.0"},
		{Index: 1, MinorNumber: 1, UUID: "GPU-1", Name: "NVIDIA A100-SXM4-40GB", MemoryMiB: 40960, Family: "ampere", ComputeMajor: 8, Healthy: true, PCIBusID: "00000000:0F:00.0"}}
	topo := gputopology.NewTopology(2)
	topo.Set(0, 1, gputopology.Link{NVLinks: 12, PCIe: gputopology.PIX})
	slice := &api.ResourceSlice{ObjectMeta: api.ObjectMeta{Name: gpudriver.SliceName(node)}, Spec: api.ResourceSliceSpec{
		Driver: gpudriver.DriverName, NodeName: &node, Pool: api.ResourcePool{Name: node, Generation: 3, ResourceSliceCount: 1},
		Devices: gpudriver.Devices(gpus, topo, true, "")}}
	claim := &api.ResourceClaim{ObjectMeta: api.ObjectMeta{Name: "pod1-gpu-abcde", Namespace: "default", UID: "c1"},
		Spec: api.ResourceClaimSpec{Devices: api.DeviceClaim{Requests: []api.DeviceRequest{{Name: "gpu", Exactly: &api.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com"}}}}},
		Status: api.ResourceClaimStatus{
			Allocation:  &api.AllocationResult{Devices: api.DeviceAllocationResult{Results: []api.DeviceRequestAllocationResult{{Request: "gpu", Driver: gpudriver.DriverName, Pool: node, Device: "gpu-1"}}}},
			ReservedFor: []api.ResourceClaimConsumerReference{{Resource: "pods", Name: "pod1", UID: "p1"}}}}
	pending := &api.ResourceClaim{ObjectMeta: api.ObjectMeta{Name: "waiting", Namespace: "default", UID: "c2"}, Spec: claim.Spec}
	cl := fake.New(slice, claim, pending)
	for _, tc := range []struct {
		name string
		obj  api.Object
		want []string
	}{
		{"allocated claim", claim, []string{"State:", "allocated,reserved", "gpu.nvidia.com", "gpu-1", "Reserved For:", "pod1", "Device Class:", "ExactCount (1)"}},
		{"pending claim", pending, []string{"pending", "Allocation:", "<none>"}},
		{"slice", slice, []string{"Pool:", "generation 3", "gpu-0:", "<free>", "default/pod1-gpu-abcde", "productName:", "NVIDIA A100-SXM4-40GB", "cudaComputeCapability:", "8.0.0 (version)", "skiff.dev/nvlinkDomain:", "memory:", "40Gi"}},
		{"class", api.NVIDIAGPUDeviceClass(), []string{"Selectors:", api.NVIDIAGPUDeviceClassSelector}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := describeObject(context.Background(), &b, cl, api.MustKindOf(tc.obj), tc.obj, time.Now()); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("describe lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
}
