package table

import (
	"reflect"
	"testing"
	"time"

	"skiff.dev/skiff/api"
)

// The STATE column as Kubernetes' resourceClaimState: students see
// pending, then allocated,reserved while a pod uses the claim, and
// deleted,... while it is being deleted.
func TestResourceClaimState(t *testing.T) {
	alloc := &api.AllocationResult{Devices: api.DeviceAllocationResult{Results: []api.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: "gpu.nvidia.com", Pool: "node-1", Device: "gpu-0"}}}}
	reserved := []api.ResourceClaimConsumerReference{{Resource: "pods", Name: "pod0", UID: "u0"}}
	deleting := ago(time.Second)
	tests := []struct {
		name     string
		deleting bool
		alloc    *api.AllocationResult
		reserved []api.ResourceClaimConsumerReference
		want     string
	}{
		{"new claim", false, nil, nil, "pending"},
		{"allocated, no pod yet", false, alloc, nil, "allocated"},
		{"allocated and in use", false, alloc, reserved, "allocated,reserved"},
		{"being deleted, never allocated", true, nil, nil, "deleted"},
		{"being deleted, still allocated", true, alloc, nil, "deleted,allocated"},
		{"being deleted while in use", true, alloc, reserved, "deleted,allocated,reserved"},
	}
	p := For(api.MustKindOf(&api.ResourceClaim{}))
	if got := Headers(p.Columns, true); !reflect.DeepEqual(got, []string{"NAME", "STATE", "AGE"}) {
		t.Errorf("headers %v", got)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &api.ResourceClaim{ObjectMeta: meta("gpu-test1", "gpu-claim", 3*time.Minute)}
			if tc.deleting {
				c.DeletionTimestamp = &deleting
			}
			c.Status.Allocation, c.Status.ReservedFor = tc.alloc, tc.reserved
			if got := ResourceClaimState(c); got != tc.want {
				t.Errorf("state %q, want %q", got, tc.want)
			}
			if got, want := row(p, c, false), []string{"gpu-claim", tc.want, "3m"}; !reflect.DeepEqual(got, want) {
				t.Errorf("row %q, want %q", got, want)
			}
		})
	}
}

func TestResourceSliceColumns(t *testing.T) {
	node, allNodes := "node-1", true
	tests := []struct {
		name string
		spec api.ResourceSliceSpec
		want []string
	}{
		{"a node's own", api.ResourceSliceSpec{Driver: "gpu.nvidia.com", NodeName: &node, Pool: api.ResourcePool{Name: node}},
			[]string{"s", "node-1", "gpu.nvidia.com", "node-1", "5m"}},
		{"every node", api.ResourceSliceSpec{Driver: "dra.example.com", AllNodes: &allNodes, Pool: api.ResourcePool{Name: "shared"}},
			[]string{"s", "<none>", "dra.example.com", "shared", "5m"}},
	}
	p := For(api.MustKindOf(&api.ResourceSlice{}))
	if got := Headers(p.Columns, true); !reflect.DeepEqual(got, []string{"NAME", "NODE", "DRIVER", "POOL", "AGE"}) {
		t.Errorf("headers %v", got)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &api.ResourceSlice{ObjectMeta: meta("", "s", 5*time.Minute), Spec: tc.spec}
			if got := row(p, s, true); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("row %q, want %q", got, tc.want)
			}
		})
	}
}
