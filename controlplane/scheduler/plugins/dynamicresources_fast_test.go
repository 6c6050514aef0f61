package plugins

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"

	"skiff.dev/skiff/client/fake"
)

// The count Filter makes for "exactly N of one class" claims agrees with
// the structured allocator on every node it answers for, and answers for
// every node where the allocator succeeds; class CEL results come from
// the cache after the first evaluation. Random nodes: 8 devices, some not
// GPUs, some allocated; 1-2 claims of 1-4 devices.
func TestCountAgreesWithAllocator(t *testing.T) {
	ctx := context.Background()
	pl := NewDynamicResources(fake.New(), nil)
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: GPUDriverName, ResourceVersion: "1"},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}}}}
	pl.classesK8s[class.Name] = class
	rng := rand.New(rand.NewPCG(24, 4))
	node := "dgx-1"
	for round := range 300 {
		sl := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s", ResourceVersion: fmt.Sprint(round)},
			Spec: resourcev1.ResourceSliceSpec{Driver: GPUDriverName, NodeName: &node, Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}}}
		allocated := sets.New[structured.DeviceID]()
		for i := range 8 {
			typ := "gpu"
			if rng.IntN(4) == 0 {
				typ = "mig"
			}
			name := fmt.Sprintf("gpu-%d", i)
			sl.Spec.Devices = append(sl.Spec.Devices, resourcev1.Device{Name: name,
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"type": {StringValue: &typ}}})
			if rng.IntN(3) == 0 {
				allocated.Insert(structured.MakeDeviceID(GPUDriverName, node, name))
			}
		}
		var claims []*resourcev1.ResourceClaim
		for c := range 1 + rng.IntN(2) {
			claims = append(claims, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("c", c), UID: "u"},
				Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
					Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class.Name, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: int64(1 + rng.IntN(4))}}}}}})
		}
		s := &draState{toAllocate: claims, classes: []string{class.Name}}
		pl.mu.Lock()
		pl.inUse = map[structured.DeviceID]int{}
		for id := range allocated {
			pl.inUse[id] = 1
		}
		pl.mu.Unlock()
		var ok bool
		if _, s.simpleCount, ok = simpleDemand(claims); !ok {
			t.Fatal("quick-start claims are not a simple demand")
		}
		s.simpleClassObj, s.simpleKey = class, classKey(class)
		pl.mu.Lock()
		pl.indexSlice(sl.Name, sl)
		pl.slicesK8s[sl.Name] = sl
		pl.mu.Unlock()
		results, err := pl.allocate(ctx, s, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
		allocatorFits := err == nil && len(results) == len(claims)
		fits, answered := pl.countFits(ctx, s, node)
		if allocatorFits != (answered && fits) || (answered && !fits) {
			t.Fatalf("round %d: allocator fits=%v (err %v), count fits=%v answered=%v", round, allocatorFits, err, fits, answered)
		}
	}
	// The class was evaluated once per version of the node's slices, then
	// read back.
	nd := pl.devicesOf(node)
	nd.mu.RLock()
	cached := len(nd.byClass)
	nd.mu.RUnlock()
	if cached != 1 || !nd.countable {
		t.Errorf("%d cached class results for the last slice, want 1", cached)
	}
}

func TestSimpleDemand(t *testing.T) {
	exact := func(class string, n int64) resourcev1.DeviceRequest {
		return resourcev1.DeviceRequest{Name: "r", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, Count: n}}
	}
	claim := func(rs ...resourcev1.DeviceRequest) *resourcev1.ResourceClaim {
		return &resourcev1.ResourceClaim{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: rs}}}
	}
	withSel := exact("gpu", 1)
	withSel.Exactly.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: "true"}}}
	allMode := exact("gpu", 0)
	allMode.Exactly.AllocationMode = resourcev1.DeviceAllocationModeAll
	for _, tc := range []struct {
		name   string
		claims []*resourcev1.ResourceClaim
		count  int64
		ok     bool
	}{
		{"one GPU", []*resourcev1.ResourceClaim{claim(exact("gpu", 0))}, 1, true},
		{"two claims", []*resourcev1.ResourceClaim{claim(exact("gpu", 2)), claim(exact("gpu", 1))}, 3, true},
		{"two classes", []*resourcev1.ResourceClaim{claim(exact("gpu", 1), exact("mig", 1))}, 0, false},
		{"a selector of its own", []*resourcev1.ResourceClaim{claim(withSel)}, 0, false},
		{"allocation mode All", []*resourcev1.ResourceClaim{claim(allMode)}, 0, false},
	} {
		_, n, ok := simpleDemand(tc.claims)
		if ok != tc.ok || (ok && n != tc.count) {
			t.Errorf("%s: count %d ok %v, want %d %v", tc.name, n, ok, tc.count, tc.ok)
		}
	}
}
