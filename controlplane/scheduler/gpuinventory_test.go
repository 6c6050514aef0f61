package scheduler

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/internal/testwait"
)

// withGPUs sets a node's nvidia.com/gpu capacity and allocatable as the
// agent reports them: capacity every GPU, allocatable the healthy ones
// less those claims hold (allocated or prepared).
func withGPUs(capacity, allocatable int64) func(*api.Node) {
	return func(n *api.Node) {
		n.Status.Capacity = api.ResourceList{api.ResourceNvidiaGPU: *resource.NewQuantity(capacity, resource.DecimalSI)}
		n.Status.Allocatable[api.ResourceNvidiaGPU] = *resource.NewQuantity(allocatable, resource.DecimalSI)
	}
}

// timeSliced labels a node as GPU feature discovery does under
// time-slicing with replicas per GPU.
func timeSliced(replicas int) func(*api.Node) {
	return func(n *api.Node) {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[api.LabelGPUSharingStrategy] = "time-slicing"
		n.Labels[api.LabelGPUReplicas] = fmt.Sprint(replicas)
	}
}

// claimOnNode is a claim allocated to devices of node's pool, with the
// nodeSelector the allocator writes.
func claimOnNode(name, node string, devices ...string) *api.ResourceClaim {
	c := heldClaim(name, devices...)
	for i := range c.Status.Allocation.Devices.Results {
		c.Status.Allocation.Devices.Results[i].Pool = node
	}
	c.Status.Allocation.NodeSelector = &api.NodeSelector{NodeSelectorTerms: []api.NodeSelectorTerm{{
		MatchFields: []api.NodeSelectorRequirement{{Key: "metadata.name", Operator: "In", Values: []string{node}}}}}}
	return c
}

// One GPU inventory, scheduler side: GPUs that claims hold are not given
// to nvidia.com/gpu pods, whether or not the node has prepared them yet
// (and lowered its allocatable), and are not counted twice once it has.
func TestNodeResourcesFitCountsClaimedGPUs(t *testing.T) {
	cases := []struct {
		name string
		node *api.Node
		objs []api.Object
		gpus int
		want string // selected node; "" unschedulable
	}{
		{name: "no claims: the device plugin's 4", node: gpuNode("dgx-1", 0, withGPUs(4, 4)), gpus: 4, want: "dgx-1"},
		{name: "claim not prepared yet holds 2 of 4", node: gpuNode("dgx-1", 0, withGPUs(4, 4)),
			objs: []api.Object{claimOnNode("c", "dgx-1", "gpu-0", "gpu-1")}, gpus: 3},
		{name: "claim not prepared yet, 2 left", node: gpuNode("dgx-1", 0, withGPUs(4, 4)),
			objs: []api.Object{claimOnNode("c", "dgx-1", "gpu-0", "gpu-1")}, gpus: 2, want: "dgx-1"},
		{name: "node caught up: allocatable already lowered, not counted twice", node: gpuNode("dgx-1", 0, withGPUs(4, 2)),
			objs: []api.Object{claimOnNode("c", "dgx-1", "gpu-0", "gpu-1")}, gpus: 2, want: "dgx-1"},
		{name: "every GPU claimed", node: gpuNode("dgx-1", 0, withGPUs(2, 2)),
			objs: []api.Object{claimOnNode("c", "dgx-1", "gpu-0", "gpu-1")}, gpus: 1},
		{name: "claim without nodeSelector: counted on its pool's node", node: gpuNode("dgx-1", 0, withGPUs(2, 2)),
			objs: []api.Object{heldClaim("c", "gpu-0", "gpu-1")}, gpus: 1},
		{name: "claim on another node", node: gpuNode("dgx-1", 0, withGPUs(2, 2)),
			objs: []api.Object{claimOnNode("c", "dgx-2", "gpu-0", "gpu-1")}, gpus: 2, want: "dgx-1"},
		{name: "an unhealthy GPU: allocatable still bounds", node: gpuNode("dgx-1", 0, withGPUs(4, 3)),
			objs: []api.Object{claimOnNode("c", "dgx-1", "gpu-0")}, gpus: 3, want: "dgx-1"},
		// Time-slicing, 4 replicas of each GPU: a claimed GPU is 4 of them.
		{name: "time-sliced: a claim takes a GPU's 4 replicas", node: gpuNode("dgx-1", 0, withGPUs(16, 16), timeSliced(4)),
			objs: []api.Object{claimOnNode("c", "dgx-1", "gpu-0")}, gpus: 13},
		{name: "time-sliced: 12 replicas left", node: gpuNode("dgx-1", 0, withGPUs(16, 16), timeSliced(4)),
			objs: []api.Object{claimOnNode("c", "dgx-1", "gpu-0")}, gpus: 12, want: "dgx-1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := append([]api.Object{tc.node, gpuClass(), gpuSlice("dgx-1", "nvl-0", "nvl-0", "nvl-0", "nvl-0")}, tc.objs...)
			f := newDRAFixture(t, append(objs, gpuPod("p", tc.gpus))...)
			res := f.step()
			if res == nil {
				t.Fatal("the pod was not tried")
			}
			if res.SelectedNode != tc.want {
				t.Fatalf("selected %q, want %q: %s\n%s", res.SelectedNode, tc.want, res.Message, Explain(res))
			}
			if tc.want == "" && res.Message != "0/1 nodes are available: 1 Insufficient nvidia.com/gpu." {
				t.Errorf("message %q", res.Message)
			}
		})
	}
}

// In one run: a claim pod reserves the node's only GPU; the device-plugin
// pod of the next cycle, before the claim's allocation is written, must
// not get it; once the claim is deallocated it fits.
func TestClaimedGPUsInFlightAndFreed(t *testing.T) {
	f := newDRAFixture(t, gpuNode("dgx-1", 0, withGPUs(1, 1)), gpuClass(), gpuSlice("dgx-1", "nvl-0"), gpuClaim("a"),
		claimPodFor("pa", "a"), gpuPod("pb", 1))
	t1 := f.cycle()
	t2 := f.cycle()
	if t1 == nil || t2 == nil {
		t.Fatal("pods not tried")
	}
	if t1.qp.Info.Pod.Name != "pa" || t1.result.SelectedNode != "dgx-1" {
		t.Fatalf("first %s on %q, want pa on dgx-1", t1.qp.Info.Pod.Name, t1.result.SelectedNode)
	}
	if t2.result.SelectedNode != "" || t2.result.Message != "0/1 nodes are available: 1 Insufficient nvidia.com/gpu." {
		t.Fatalf("device-plugin pod: node %q message %q, want Insufficient nvidia.com/gpu", t2.result.SelectedNode, t2.result.Message)
	}
	f.finish(t1)
	f.finish(t2)
	testwait.For(t, 5*time.Second, "claim a allocated", func() bool { return f.claim("a").Status.Allocation != nil })

	// The claim is deallocated (its pod done: the resourceclaim
	// controller's work); the event moves pb, past its backoff.
	f.clock = f.clock.Add(11 * time.Second)
	c := f.claim("a")
	c.Status.Allocation, c.Status.ReservedFor = nil, nil
	if _, err := f.c.UpdateStatus(f.ctx, c); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "the claim's GPU no longer counted", func() bool { return f.s.gpus.OnNode("dgx-1") == 0 })
	// The handler counts the GPU free, then reports the event that moves
	// pb: wait for the move, not only the count.
	testwait.For(t, 5*time.Second, "pb moved out of unschedulableQ by the claim's event", func() bool {
		return f.s.queue.Where("gpu-demo/pb") != "unschedulable"
	})
	f.s.queue.Flush() // pb may be in backoffQ: the claim changed while it was in flight
	res := f.step()
	if res == nil {
		t.Fatalf("pb not tried again: %s", f.s.queue.Where("gpu-demo/pb"))
	}
	if res.SelectedNode != "dgx-1" {
		t.Fatalf("pb: node %q message %q, want dgx-1", res.SelectedNode, res.Message)
	}
}
