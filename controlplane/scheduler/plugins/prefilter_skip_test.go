package plugins

import (
	"context"
	"testing"

	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// A pod that needs nothing of DynamicResources, VolumeBinding or HAMi has
// their PreFilter say Skip, so their Filter is not run on every node (as
// Kubernetes' DynamicResources and VolumeBinding do); a pod that does
// need them is not skipped.
func TestPreFilterSkipsPodsThatNeedNothing(t *testing.T) {
	ctx := context.Background()
	plain := testPod("plain")
	for _, pl := range []framework.PreFilterPlugin{&DynamicResources{}, &VolumeBinding{}, NewHAMi(nil, nil)} {
		if s := pl.PreFilter(ctx, framework.NewCycleState(), plain); s.Code() != framework.Skip {
			t.Errorf("%s: PreFilter of a plain pod: %v %q, want Skip", pl.Name(), s.Code(), s.Message())
		}
	}
	// HAMi still leaves its state for Score and Reserve.
	state := framework.NewCycleState()
	NewHAMi(nil, nil).PreFilter(ctx, state, plain)
	if hamiStateOf(state) == nil {
		t.Error("HAMi: no state after a Skip")
	}
	asks := slicePod("slice", nil, "nvidia.com/gpu", "1", "nvidia.com/gpumem", "3000")
	if s := NewHAMi(nil, nil).PreFilter(ctx, framework.NewCycleState(), asks); !s.IsSuccess() {
		t.Errorf("HAMi: PreFilter of a pod that asks for a slice: %v %q", s.Code(), s.Message())
	}
}
