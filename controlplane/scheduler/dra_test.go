package scheduler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/controlplane/scheduler/framework"
	"skiff.dev/skiff/internal/testwait"
)

const gpuDriver = "gpu.nvidia.com"

// gpuClass is NVIDIA's DeviceClass.
func gpuClass() *api.DeviceClass {
	return &api.DeviceClass{ObjectMeta: api.ObjectMeta{Name: gpuDriver}, Spec: api.DeviceClassSpec{Selectors: []api.DeviceSelector{{CEL: &api.CELDeviceSelector{
		Expression: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}}}}
}

// gpuSlice publishes node's GPUs gpu-0..: domains[i] is gpu-i's NVLink domain.
func gpuSlice(node string, domains ...string) *api.ResourceSlice {
	s := &api.ResourceSlice{ObjectMeta: api.ObjectMeta{Name: node + "-gpu.nvidia.com"}, Spec: api.ResourceSliceSpec{
		Driver: gpuDriver, NodeName: &node, Pool: api.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}}}
	for i, d := range domains {
		typ, product, ver, dom := "gpu", "NVIDIA H100 80GB HBM3", "550.54.15", d
		s.Spec.Devices = append(s.Spec.Devices, api.Device{
			Name: "gpu-" + string(rune('0'+i)),
			Attributes: map[string]api.DeviceAttribute{"type": {StringValue: &typ}, "productName": {StringValue: &product},
				"driverVersion": {VersionValue: &ver}, "skiff.dev/nvlinkDomain": {StringValue: &dom}},
			Capacity: map[string]api.DeviceCapacity{"memory": {Value: resource.MustParse("80Gi")}},
		})
	}
	return s
}

type reqOpt func(*api.DeviceRequest)

func count(n int64) reqOpt { return func(r *api.DeviceRequest) { r.Exactly.Count = n } }
func all(r *api.DeviceRequest) {
	r.Exactly.AllocationMode, r.Exactly.Count = api.DeviceAllocationModeAll, 0
}
func selector(expr string) reqOpt {
	return func(r *api.DeviceRequest) {
		r.Exactly.Selectors = append(r.Exactly.Selectors, api.DeviceSelector{CEL: &api.CELDeviceSelector{Expression: expr}})
	}
}
func class(name string) reqOpt {
	return func(r *api.DeviceRequest) { r.Exactly.DeviceClassName = name }
}

// gpuClaim asks for GPUs in request "gpu".
func gpuClaim(name string, opts ...reqOpt) *api.ResourceClaim {
	r := api.DeviceRequest{Name: "gpu", Exactly: &api.ExactDeviceRequest{DeviceClassName: gpuDriver, AllocationMode: api.DeviceAllocationModeExactCount, Count: 1}}
	for _, o := range opts {
		o(&r)
	}
	return &api.ResourceClaim{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "gpu-demo"}, Spec: api.ResourceClaimSpec{Devices: api.DeviceClaim{Requests: []api.DeviceRequest{r}}}}
}

func withConstraint(c *api.ResourceClaim, match bool, attr string) *api.ResourceClaim {
	k := api.DeviceConstraint{Requests: []string{"gpu"}}
	if match {
		k.MatchAttribute = &attr
	} else {
		k.DistinctAttribute = &attr
	}
	c.Spec.Devices.Constraints = append(c.Spec.Devices.Constraints, k)
	return c
}

// heldClaim is a claim already allocated to devices.
func heldClaim(name string, devices ...string) *api.ResourceClaim {
	c := gpuClaim(name)
	c.Status.Allocation = &api.AllocationResult{}
	for _, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, api.DeviceRequestAllocationResult{Request: "gpu", Driver: gpuDriver, Pool: "dgx-1", Device: d})
	}
	return c
}

// claimPodFor is a pod using claim through entry "gpu".
func claimPodFor(name, claim string) *api.Pod {
	return gpuPod(name, 0, func(p *api.Pod) {
		p.Spec.ResourceClaims = []api.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim}}
		p.Spec.Containers[0].Resources.Claims = []api.ContainerResourceClaim{{Name: "gpu"}}
	})
}

// newDRAFixture is newFixture with the DynamicResources plugin's
// informers running against the fake API.
func newDRAFixture(t *testing.T, objs ...api.Object) *fixture {
	t.Helper()
	var nonPods, pods []api.Object
	for _, o := range objs {
		if _, ok := o.(*api.Pod); ok {
			pods = append(pods, o)
		} else {
			nonPods = append(nonPods, o)
		}
	}
	f := newFixture(t, defaultConfig(noPreemption), nonPods...)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, es := range f.s.sources {
		if em, ok := es.(framework.EventEmitter); ok {
			em.SetEventSink(func(ev framework.ClusterEvent, o, n any) { f.s.queue.Move(ev, o, n) })
		}
		go es.Run(ctx, func() { f.s.queue.Move(wildCard, nil, nil) })
		if !es.WaitForSync(ctx) {
			t.Fatal("DRA informers did not sync")
		}
	}
	for _, p := range pods {
		f.add(p.(*api.Pod))
	}
	return f
}

func (f *fixture) claim(name string) *api.ResourceClaim {
	f.t.Helper()
	c, err := client.Get[*api.ResourceClaim](f.ctx, f.c, "gpu-demo", name)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

func allocatedDevices(c *api.ResourceClaim) []string {
	if c.Status.Allocation == nil {
		return nil
	}
	var out []string
	for _, r := range c.Status.Allocation.Devices.Results {
		out = append(out, r.Request+":"+r.Device)
	}
	slices.Sort(out)
	return out
}

// The allocator's cases, through the scheduler: one node with four GPUs
// in two NVLink domains (gpu-0 and gpu-3 in nvl-0, gpu-1 and gpu-2 in
// nvl-1); another claim already holds gpu-1 unless a case says otherwise.
func TestDynamicResourcesAllocation(t *testing.T) {
	domains := []string{"nvl-0", "nvl-1", "nvl-1", "nvl-0"}
	cases := []struct {
		name    string
		claim   *api.ResourceClaim
		held    []string
		want    []string // allocated request:device, sorted; nil: unschedulable
		message string   // FailedScheduling message when unschedulable
		details []string // lines the explanation must contain
	}{
		{name: "one GPU, first free", claim: gpuClaim("c"), held: []string{"gpu-1"}, want: []string{"gpu:gpu-0"}},
		{name: "two GPUs any", claim: gpuClaim("c", count(2)), held: []string{"gpu-1"}, want: []string{"gpu:gpu-0", "gpu:gpu-2"}},
		{name: "matchAttribute nvlink domain picks two connected GPUs", claim: withConstraint(gpuClaim("c", count(2)), true, "skiff.dev/nvlinkDomain"),
			held: []string{"gpu-1"}, want: []string{"gpu:gpu-0", "gpu:gpu-3"}},
		{name: "distinctAttribute one per domain", claim: withConstraint(gpuClaim("c", count(2)), false, "skiff.dev/nvlinkDomain"),
			want: []string{"gpu:gpu-0", "gpu:gpu-1"}},
		{name: "All takes every device", claim: gpuClaim("c", all), want: []string{"gpu:gpu-0", "gpu:gpu-1", "gpu:gpu-2", "gpu:gpu-3"}},
		{name: "All needs every matching device free", claim: gpuClaim("c", all), held: []string{"gpu-1"},
			message: "0/1 nodes are available: 1 cannot allocate all claims.",
			details: []string{"needs all devices of class gpu.nvidia.com; 4 devices on the node; 1 already allocated to other claims"}},
		{name: "selector on memory capacity", claim: gpuClaim("c", selector("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0")), want: []string{"gpu:gpu-0"}},
		{name: "semver selector", claim: gpuClaim("c", selector("device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0'))")), want: []string{"gpu:gpu-0"}},
		{name: "devices taken", claim: gpuClaim("c", count(4)), held: []string{"gpu-1"},
			message: "0/1 nodes are available: 1 cannot allocate all claims.",
			details: []string{"claim gpu-demo/c, request gpu: needs 4 of class gpu.nvidia.com; 4 devices on the node; 1 already allocated to other claims; 3 left (gpu-0, gpu-2, gpu-3)"}},
		{name: "no device satisfies the selector", claim: gpuClaim("c", selector("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('100Gi')) >= 0")),
			message: "0/1 nodes are available: 1 cannot allocate all claims.",
			details: []string{"4 ruled out by the request's selector #0", "closest: gpu-0 (fails the request's selector #0 only)"}},
		{name: "matchAttribute impossible", claim: withConstraint(gpuClaim("c", count(3)), true, "skiff.dev/nvlinkDomain"),
			message: "0/1 nodes are available: 1 cannot allocate all claims.",
			details: []string{"constraint #0 matchAttribute skiff.dev/nvlinkDomain: needs 3 devices with one value, at most 2 share one"}},
		{name: "firstAvailable falls back to the second choice", claim: func() *api.ResourceClaim {
			c := gpuClaim("c")
			c.Spec.Devices.Requests[0].Exactly = nil
			c.Spec.Devices.Requests[0].FirstAvailable = []api.DeviceSubRequest{
				{Name: "eight", DeviceClassName: gpuDriver, AllocationMode: api.DeviceAllocationModeExactCount, Count: 8},
				{Name: "one", DeviceClassName: gpuDriver, AllocationMode: api.DeviceAllocationModeExactCount, Count: 1}}
			return c
		}(), want: []string{"gpu/one:gpu-0"}},
		{name: "missing class", claim: gpuClaim("c", class("nope")),
			message: "0/1 nodes are available: request gpu: device class nope does not exist."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := []api.Object{gpuNode("dgx-1", 0), gpuClass(), gpuSlice("dgx-1", domains...), tc.claim}
			if len(tc.held) > 0 {
				objs = append(objs, heldClaim("other", tc.held...))
			}
			objs = append(objs, claimPodFor("p", tc.claim.Name))
			f := newDRAFixture(t, objs...)
			res := f.step()
			if res == nil {
				t.Fatalf("the pod was not tried: %s", f.s.queue.Gated("gpu-demo/p"))
			}
			if tc.want == nil {
				if res.SelectedNode != "" || res.Message != tc.message {
					t.Fatalf("node %q message %q, want unschedulable with %q", res.SelectedNode, res.Message, tc.message)
				}
				explained := Explain(res)
				for _, d := range tc.details {
					if !strings.Contains(explained, d) {
						t.Errorf("explanation lacks %q:\n%s", d, explained)
					}
				}
				return
			}
			if res.SelectedNode != "dgx-1" {
				t.Fatalf("not scheduled: %s\n%s", res.Message, Explain(res))
			}
			c := f.claim(tc.claim.Name)
			if got := allocatedDevices(c); !slices.Equal(got, tc.want) {
				t.Errorf("allocated %v, want %v", got, tc.want)
			}
			if !c.IsReservedFor(f.pod("gpu-demo", "p").UID) || !slices.Contains(c.Finalizers, api.ResourceClaimFinalizer) {
				t.Errorf("reservedFor %v finalizers %v: want the pod and the delete protection", c.Status.ReservedFor, c.Finalizers)
			}
			if p := f.pod("gpu-demo", "p"); p.Spec.NodeName != "dgx-1" {
				t.Errorf("pod bound to %q", p.Spec.NodeName)
			}
		})
	}
}

// Two pods, two claims, one free GPU: the second cycle must not hand out
// the GPU the first reserved, even before the informer shows the claim.
func TestDynamicResourcesNoDeviceTwice(t *testing.T) {
	f := newDRAFixture(t, gpuNode("dgx-1", 0), gpuClass(), gpuSlice("dgx-1", "nvl-0"), gpuClaim("a"), gpuClaim("b"),
		claimPodFor("pa", "a"), claimPodFor("pb", "b"))
	t1 := f.cycle()
	t2 := f.cycle()
	if t1 == nil || t2 == nil {
		t.Fatal("pods not tried")
	}
	if t1.result.SelectedNode != "dgx-1" || t2.result.SelectedNode != "" {
		t.Fatalf("first %q, second %q: want only the first placed", t1.result.SelectedNode, t2.result.SelectedNode)
	}
	f.finish(t1)
	f.finish(t2)
	testwait.For(t, 5*time.Second, "claim a allocated", func() bool { return f.claim("a").Status.Allocation != nil })
	if f.claim("b").Status.Allocation != nil {
		t.Error("claim b allocated too")
	}
}

// One claim, two pods (NVIDIA's gpu-test3): the second pod's cycle runs
// while the first's allocation is reserved but not written. It must use
// that allocation (Kubernetes' assume cache), not allocate the claim
// again, so both bind at once and share the one device.
func TestDynamicResourcesSharedClaimInFlight(t *testing.T) {
	for _, secondFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("second pod binds first %v", secondFirst), func(t *testing.T) {
			f := newDRAFixture(t, gpuNode("dgx-1", 0), gpuClass(), gpuSlice("dgx-1", "nvl-0", "nvl-0"), gpuClaim("shared"),
				claimPodFor("pa", "shared"), claimPodFor("pb", "shared"))
			t1 := f.cycle()
			t2 := f.cycle()
			if t1 == nil || t2 == nil {
				t.Fatal("pods not tried")
			}
			if t1.result.SelectedNode != "dgx-1" || t2.result.SelectedNode != "dgx-1" {
				t.Fatalf("first %q, second %q (%s): want both placed", t1.result.SelectedNode, t2.result.SelectedNode, t2.result.Message)
			}
			// Either binding may write first: the other reserves only.
			if secondFirst {
				t1, t2 = t2, t1
			}
			f.finish(t1)
			f.finish(t2)
			testwait.For(t, 5*time.Second, "both pods bound", func() bool {
				return f.pod("gpu-demo", "pa").Spec.NodeName == "dgx-1" && f.pod("gpu-demo", "pb").Spec.NodeName == "dgx-1"
			})
			c := f.claim("shared")
			if got := allocatedDevices(c); len(got) != 1 {
				t.Errorf("allocated %v, want one device", got)
			}
			for _, p := range []string{"pa", "pb"} {
				if !c.IsReservedFor(f.pod("gpu-demo", p).UID) {
					t.Errorf("claim reservedFor %v lacks %s", c.Status.ReservedFor, p)
				}
			}
		})
	}
}

// PreEnqueue: a pod whose template claim is not made yet waits, gated,
// with Kubernetes' message; once the claim exists it is tried.
func TestDynamicResourcesPreEnqueue(t *testing.T) {
	tmpl := "single-gpu"
	p := gpuPod("p", 0, func(p *api.Pod) {
		p.Spec.ResourceClaims = []api.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}}
	})
	f := newDRAFixture(t, gpuNode("dgx-1", 0), gpuClass(), gpuSlice("dgx-1", "nvl-0"), p)
	if got, want := f.s.queue.Gated("gpu-demo/p"), `pod "gpu-demo/p": ResourceClaim not created yet`; got != want {
		t.Fatalf("gated %q, want %q", got, want)
	}
	if f.cycle() != nil {
		t.Fatal("a gated pod was tried")
	}
	f.createTemplateClaim()
	if res := f.step(); res == nil || res.SelectedNode != "dgx-1" {
		t.Fatalf("after the claim exists: %+v", res)
	}
}

// createTemplateClaim does the resourceclaim controller's work for pod
// gpu-demo/p's template claim "gpu": it creates the claim, then records it
// in the pod's status, and waits until the pod leaves the PreEnqueue gate.
func (f *fixture) createTemplateClaim() {
	f.t.Helper()
	claim := gpuClaim("p-gpu-abcde")
	claim.OwnerReferences = []api.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: f.pod("gpu-demo", "p").UID, Controller: ptrTo(true)}}
	if _, err := f.c.Create(f.ctx, claim); err != nil {
		f.t.Fatal(err)
	}
	old := f.pod("gpu-demo", "p")
	cur := api.Clone(old)
	name := claim.Name
	cur.Status.ResourceClaimStatuses = []api.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &name}}
	if _, err := f.c.UpdateStatus(f.ctx, cur); err != nil {
		f.t.Fatal(err)
	}
	f.sync(old)
	testwait.For(f.t, 5*time.Second, "the pod leaves the gate", func() bool {
		return f.s.queue.Where("gpu-demo/p") == "active"
	})
}

func ptrTo[T any](v T) *T { return &v }

// The pod of NVIDIA's quick start (a claim from a template) is bound as
// soon as the resourceclaim controller has made its claim: the claim's
// creation and the pod's resourceClaimStatuses requeue it (queueing hints),
// with no periodic flush (MaxUnschedulable is an hour here).
func TestTemplateClaimPodRequeuedByEvents(t *testing.T) {
	tmpl := "single-gpu"
	pod := gpuPod("p", 0, func(p *api.Pod) {
		p.Spec.ResourceClaims = []api.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}}
		p.Spec.Containers[0].Resources.Claims = []api.ContainerResourceClaim{{Name: "gpu"}}
	})
	c := fake.New(gpuNode("dgx-1", 0), gpuClass(), gpuSlice("dgx-1", "nvl-0"), pod)
	s, err := New(c, nil, Options{Recorder: &events{}, MaxUnschedulable: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	testwait.For(t, 15*time.Second, "the pod gated", func() bool { return s.queue.Gated("gpu-demo/p") != "" })
	// The resourceclaim controller: the claim, then the pod's status.
	p, err := client.Get[*api.Pod](ctx, c, "gpu-demo", "p")
	if err != nil {
		t.Fatal(err)
	}
	claim := gpuClaim("p-gpu-abcde")
	claim.OwnerReferences = []api.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: p.UID, Controller: ptrTo(true)}}
	if _, err := c.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	name := claim.Name
	p.Status.ResourceClaimStatuses = []api.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &name}}
	if _, err := c.UpdateStatus(ctx, p); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 15*time.Second, "the pod bound", func() bool {
		p, err := client.Get[*api.Pod](ctx, c, "gpu-demo", "p")
		return err == nil && p.Spec.NodeName == "dgx-1"
	})
}

// migSlices publishes one GPU's counters (8 memory slices) in one slice
// and, in another slice of the same pool, MIG devices a and b consuming
// each slices of them (partitionable devices, KEP-4815).
func migSlices(node string, each int) []api.Object {
	counters := &api.ResourceSlice{ObjectMeta: api.ObjectMeta{Name: node + "-counters"}, Spec: api.ResourceSliceSpec{
		Driver: gpuDriver, NodeName: &node, Pool: api.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 2},
		SharedCounters: []api.CounterSet{{Name: "gpu-0-counters", Counters: map[string]api.Counter{"memory-slices": {Value: resource.MustParse("8")}}}}}}
	devices := &api.ResourceSlice{ObjectMeta: api.ObjectMeta{Name: node + "-mig"}, Spec: api.ResourceSliceSpec{
		Driver: gpuDriver, NodeName: &node, Pool: api.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 2}}}
	for _, name := range []string{"gpu-0-mig-a", "gpu-0-mig-b"} {
		typ := "mig"
		devices.Spec.Devices = append(devices.Spec.Devices, api.Device{
			Name:       name,
			Attributes: map[string]api.DeviceAttribute{"type": {StringValue: &typ}},
			ConsumesCounters: []api.DeviceCounterConsumption{{CounterSet: "gpu-0-counters",
				Counters: map[string]api.Counter{"memory-slices": {Value: *resource.NewQuantity(int64(each), resource.DecimalSI)}}}},
		})
	}
	class := &api.DeviceClass{ObjectMeta: api.ObjectMeta{Name: "mig.nvidia.com"}, Spec: api.DeviceClassSpec{Selectors: []api.DeviceSelector{{CEL: &api.CELDeviceSelector{
		Expression: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"}}}}}
	return []api.Object{counters, devices, class}
}

// The allocator honours shared counters: two MIG devices whose counters
// overflow their GPU's (5 + 5 of 8 memory slices) are never both
// allocated, in one claim or in two; two that fit (4 + 4) are.
func TestDynamicResourcesCounters(t *testing.T) {
	two := gpuClaim("two", class("mig.nvidia.com"), count(2))
	t.Run("one claim, overflowing", func(t *testing.T) {
		objs := append(migSlices("dgx-1", 5), gpuNode("dgx-1", 0), two, claimPodFor("p", "two"))
		f := newDRAFixture(t, objs...)
		res := f.step()
		if res == nil || res.SelectedNode != "" || res.Message != "0/1 nodes are available: 1 cannot allocate all claims." {
			t.Fatalf("result %+v, want unschedulable: cannot allocate all claims", res)
		}
		if c := f.claim("two"); c.Status.Allocation != nil {
			t.Errorf("allocated %v", allocatedDevices(c))
		}
	})
	t.Run("one claim, fitting", func(t *testing.T) {
		objs := append(migSlices("dgx-1", 4), gpuNode("dgx-1", 0), two, claimPodFor("p", "two"))
		f := newDRAFixture(t, objs...)
		if res := f.step(); res == nil || res.SelectedNode != "dgx-1" {
			t.Fatalf("result %+v, want placed", res)
		}
		if got := allocatedDevices(f.claim("two")); !slices.Equal(got, []string{"gpu:gpu-0-mig-a", "gpu:gpu-0-mig-b"}) {
			t.Errorf("allocated %v, want both MIG devices", got)
		}
	})
	t.Run("two claims, overflowing", func(t *testing.T) {
		objs := append(migSlices("dgx-1", 5), gpuNode("dgx-1", 0), gpuClaim("a", class("mig.nvidia.com")), gpuClaim("b", class("mig.nvidia.com")),
			claimPodFor("pa", "a"), claimPodFor("pb", "b"))
		f := newDRAFixture(t, objs...)
		t1 := f.cycle()
		t2 := f.cycle() // before the first allocation is written: the assumed one counts
		if t1 == nil || t2 == nil {
			t.Fatal("pods not tried")
		}
		if t1.result.SelectedNode != "dgx-1" || t2.result.SelectedNode != "" {
			t.Fatalf("first %q, second %q: want only the first placed", t1.result.SelectedNode, t2.result.SelectedNode)
		}
		f.finish(t1)
		f.finish(t2)
		testwait.For(t, 5*time.Second, "claim a allocated", func() bool { return f.claim("a").Status.Allocation != nil })
		if f.claim("b").Status.Allocation != nil {
			t.Errorf("claim b allocated too: %v and %v", allocatedDevices(f.claim("a")), allocatedDevices(f.claim("b")))
		}
		// And once a's allocation is in the informer, b still does not fit.
		if res := f.step(); res != nil && res.SelectedNode != "" {
			t.Errorf("b placed on a retry: %+v", res)
		}
	})
}
