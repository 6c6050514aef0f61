package agent

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/agent/dra/gpudriver"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/internal/testwait"
)

// schedulerMidPick is the API with a scheduler acting at one chosen
// moment: when the node's ResourceSlice is written without a GPU it
// listed before (the device manager is handing that GPU out), the claim
// is first allocated that GPU, as a scheduler whose informer still had the
// old slice would.
type schedulerMidPick struct {
	*fake.Client
	mu        sync.Mutex
	claim     string // the claim to allocate; "" once done
	allocated string // the device it was allocated
}

func (s *schedulerMidPick) Update(ctx context.Context, obj api.Object) (api.Object, error) {
	if sl, ok := obj.(*api.ResourceSlice); ok {
		s.mu.Lock()
		if s.claim != "" {
			if gone := s.leaving(ctx, sl); gone != "" {
				if err := s.allocate(ctx, gone); err != nil {
					s.mu.Unlock()
					return nil, err
				}
				s.claim, s.allocated = "", gone
			}
		}
		s.mu.Unlock()
	}
	return s.Client.Update(ctx, obj)
}

// leaving is a device the stored slice lists and next does not.
func (s *schedulerMidPick) leaving(ctx context.Context, next *api.ResourceSlice) string {
	cur, err := client.Get[*api.ResourceSlice](ctx, s.Client, "", next.Name)
	if err != nil {
		return ""
	}
	for _, d := range cur.Spec.Devices {
		if !slices.ContainsFunc(next.Spec.Devices, func(n api.Device) bool { return n.Name == d.Name }) {
			return d.Name
		}
	}
	return ""
}

func (s *schedulerMidPick) allocate(ctx context.Context, device string) error {
	c, err := client.Get[*api.ResourceClaim](ctx, s.Client, "default", s.claim)
	if err != nil {
		return err
	}
	c.Status.Allocation = &api.AllocationResult{Devices: api.DeviceAllocationResult{Results: []api.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: gpudriver.DriverName, Pool: testNode, Device: device}}}}
	c.Status.ReservedFor = []api.ResourceClaimConsumerReference{{Resource: "pods", Name: "claim-pod", UID: "claim-pod-uid"}}
	_, err = s.Client.UpdateStatus(ctx, c)
	return err
}

// The DRA/device-plugin race, agent side, made to happen every time: an
// nvidia.com/gpu pod's GPU is being picked when the scheduler allocates a
// claim that very GPU from a slice that still lists it. The claim must
// win (the pod gets another GPU) and be prepared; no GPU is held twice.
func TestDevicePluginPickLosesToAClaimAllocatedMeanwhile(t *testing.T) {
	dir, err := os.MkdirTemp("", "gr") // short: unix socket paths
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	claim := &api.ResourceClaim{ObjectMeta: api.ObjectMeta{Name: "c1", Namespace: "default", UID: "c1-uid"},
		Spec: api.ResourceClaimSpec{Devices: api.DeviceClaim{Requests: []api.DeviceRequest{{Name: "gpu",
			Exactly: &api.ExactDeviceRequest{DeviceClassName: api.NVIDIAGPUDeviceClassName, AllocationMode: api.DeviceAllocationModeExactCount, Count: 1}}}}}}
	c := &schedulerMidPick{Client: fake.New(claim)}
	ctx := t.Context()
	g, err := SetUpGPUs(ctx, GPUConfig{Spec: "sim:dgxa100", NodeName: testNode, DataDir: dir, Client: c})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	testwait.For(t, 10*time.Second, "the slice with 8 GPUs and the plugin's 8 devices", func() bool {
		s, err := client.Get[*api.ResourceSlice](ctx, c.Client, "", gpudriver.SliceName(testNode))
		return err == nil && len(s.Spec.Devices) == 8 && len(g.Manager.Snapshot()[api.ResourceNvidiaGPU].Devices) == 8
	})
	c.mu.Lock()
	c.claim = "c1"
	c.mu.Unlock()

	pod := &api.Pod{ObjectMeta: api.ObjectMeta{Name: "plugin-pod", Namespace: "default", UID: "plugin-pod-uid"},
		Spec: api.PodSpec{Containers: []api.Container{{Name: "c", Resources: api.ResourceRequirements{
			Limits: api.ResourceList{api.ResourceNvidiaGPU: *resource.NewQuantity(1, resource.DecimalSI)}}}}}}
	if _, err := g.Manager.Allocate(ctx, pod, &pod.Spec.Containers[0]); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	taken := c.allocated
	c.mu.Unlock()
	if taken == "" {
		t.Fatal("the device manager handed out a GPU without taking it out of the slice first")
	}
	uuid := map[string]string{}
	for _, d := range g.devs {
		uuid[gpudriver.DeviceName(d)] = d.UUID
	}
	for _, h := range g.Manager.Holdings() {
		if slices.Contains(h.DeviceIDs, uuid[taken]) {
			t.Fatalf("pod %s was given %s (%s), which the claim was allocated meanwhile", h.Pod, taken, uuid[taken])
		}
	}
	if _, err := g.Driver.Prepare(ctx, gpudriver.ClaimRef{Namespace: "default", Name: "c1", UID: "c1-uid"}); err != nil {
		t.Fatalf("the claim allocated %s meanwhile: %v", taken, err)
	}
	// The slice: the pod's GPU out, the claim's (given up by the pick) back.
	held := g.heldByDevicePlugin()
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		s, err := client.Get[*api.ResourceSlice](ctx, c.Client, "", gpudriver.SliceName(testNode))
		if err != nil {
			return false, err.Error()
		}
		listed := map[string]bool{}
		var names []string
		for _, d := range s.Spec.Devices {
			listed[uuid[d.Name]] = true
			names = append(names, d.Name)
		}
		ok := len(s.Spec.Devices) == 7 && listed[uuid[taken]]
		for id := range held {
			ok = ok && !listed[id]
		}
		return ok, fmt.Sprintf("slice lists %v, the device plugin holds %v", names, held)
	})
}
