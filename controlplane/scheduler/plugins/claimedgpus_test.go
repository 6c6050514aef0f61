package plugins

import (
	"context"
	"errors"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// gpuPod asks for one nvidia.com/gpu (the device plugin).
func gpuPod(name string) *api.Pod {
	return &api.Pod{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: name, UID: name + "-uid"},
		Spec: api.PodSpec{Containers: []api.Container{{Name: "c", Image: "busybox",
			Resources: api.ResourceRequirements{Limits: api.ResourceList{api.ResourceNvidiaGPU: resource.MustParse("1")}}}}}}
}

// reserveGPUClaim creates claim name and runs Reserve for pod "claimer"
// with an allocation of gpu-0 in node's pool.
func reserveGPUClaim(t *testing.T, fc *fake.Client, pl *DynamicResources, node, name string) (*framework.CycleState, *api.Pod) {
	t.Helper()
	ctx := context.Background()
	claim := &api.ResourceClaim{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: name},
		Spec: api.ResourceClaimSpec{Devices: api.DeviceClaim{Requests: []api.DeviceRequest{{Name: "gpu",
			Exactly: &api.ExactDeviceRequest{DeviceClassName: GPUDriverName}}}}}}
	o, err := fc.Create(ctx, claim)
	if err != nil {
		t.Fatal(err)
	}
	claim = o.(*api.ResourceClaim)
	k, err := api.ToKubernetesResource[resourcev1.ResourceClaim](claim)
	if err != nil {
		t.Fatal(err)
	}
	alloc := resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: GPUDriverName, Pool: node, Device: "gpu-0"}}}}
	state := framework.NewCycleState()
	state.Write(dynamicResourcesStateKey, &draState{claims: []*api.ResourceClaim{claim}, toAllocate: []*resourcev1.ResourceClaim{k},
		toAllocateIndex: []int{0}, perNode: map[string][]resourcev1.AllocationResult{node: {alloc}}})
	pod := &api.Pod{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: "claimer", UID: "claimer-uid"}}
	if st := pl.Reserve(ctx, state, pod, node); !st.IsSuccess() {
		t.Fatal(st.AsError())
	}
	return state, pod
}

// Window (a): a claim's allocation on node n is reserved and its PreBind
// is writing it; an nvidia.com/gpu pod bound to n meanwhile would reach
// the agent before the allocation and be given the claim's GPU. Its
// PreBind waits until the write finished.
func TestDevicePluginPodWaitsForClaimWrites(t *testing.T) {
	ctx := context.Background()
	fc := fake.New()
	pl := NewDynamicResources(fc, nil)
	pl.gpus = NewClaimedGPUs()
	blocked := make(chan struct{}, 4)
	pl.gpus.onWait = func() { blocked <- struct{}{} }
	state, claimer := reserveGPUClaim(t, fc, pl, "dgx-1", "a")

	writing, release := make(chan struct{}), make(chan struct{})
	fc.Intercept(func(a fake.Action) error {
		if a.Verb == "update" && a.Kind == "ResourceClaim" && a.Subresource == "status" {
			close(writing)
			<-release
		}
		return nil
	})
	claimDone := make(chan *framework.Status, 1)
	go func() { claimDone <- pl.PreBind(ctx, state, claimer, "dgx-1") }()
	<-writing // the claim's allocation is being written now

	gpuDone := make(chan *framework.Status, 1)
	go func() { gpuDone <- pl.PreBind(ctx, framework.NewCycleState(), gpuPod("plugin"), "dgx-1") }()
	select {
	case st := <-gpuDone:
		t.Fatalf("the nvidia.com/gpu pod passed PreBind (%v) while the claim's allocation on its node was being written", st)
	case <-blocked:
	}
	// A pod of another node does not wait.
	if st := pl.PreBind(ctx, framework.NewCycleState(), gpuPod("elsewhere"), "dgx-2"); !st.IsSuccess() {
		t.Fatalf("pod of another node: %v", st)
	}
	close(release)
	if st := <-claimDone; !st.IsSuccess() {
		t.Fatalf("claim's PreBind: %v", st)
	}
	if st := <-gpuDone; !st.IsSuccess() {
		t.Fatalf("nvidia.com/gpu pod's PreBind after the write: %v", st)
	}
	fc.Intercept(nil)
	got, err := fc.Get(ctx, api.MustKindOf(&api.ResourceClaim{}), "default", "a")
	if err != nil || got.(*api.ResourceClaim).Status.Allocation == nil {
		t.Fatalf("claim not allocated after PreBind: %v", err)
	}
}

// An unreserved allocation (Permit rejected the pod) is no longer waited
// for, and a waiting pod gives up when its context ends.
func TestDevicePluginPodWaitEnds(t *testing.T) {
	fc := fake.New()
	pl := NewDynamicResources(fc, nil)
	pl.gpus = NewClaimedGPUs()
	state, claimer := reserveGPUClaim(t, fc, pl, "dgx-1", "a")

	ctx, cancel := context.WithCancel(context.Background())
	pl.gpus.onWait = cancel
	st := pl.PreBind(ctx, framework.NewCycleState(), gpuPod("plugin"), "dgx-1")
	if st.IsSuccess() || !errors.Is(st.AsError(), context.Canceled) {
		t.Fatalf("PreBind with its context ended: %v, want context canceled", st)
	}
	pl.Unreserve(context.Background(), state, claimer, "dgx-1")
	if st := pl.PreBind(context.Background(), framework.NewCycleState(), gpuPod("plugin"), "dgx-1"); !st.IsSuccess() {
		t.Fatalf("PreBind after Unreserve: %v", st)
	}
}

// A pod with its own claims and nvidia.com/gpu does not wait for itself.
func TestDevicePluginPodOwnClaims(t *testing.T) {
	fc := fake.New()
	pl := NewDynamicResources(fc, nil)
	pl.gpus = NewClaimedGPUs()
	state, _ := reserveGPUClaim(t, fc, pl, "dgx-1", "a")
	pod := gpuPod("both")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pl.gpus.onWait = cancel
	if st := pl.PreBind(ctx, state, pod, "dgx-1"); !st.IsSuccess() {
		t.Fatalf("PreBind of a pod with its own claim: %v", st)
	}
	pl.gpus.mu.Lock()
	left := len(pl.gpus.writing)
	pl.gpus.mu.Unlock()
	if left != 0 {
		t.Errorf("%d writes still recorded after PreBind", left)
	}
}
