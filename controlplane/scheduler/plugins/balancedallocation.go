package plugins

import (
	"context"
	"math"

	v1 "k8s.io/kube-scheduler/config/v1"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/config"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// NodeResourcesBalancedAllocation prefers nodes whose resources would be
// used evenly once the pod is there: for each configured resource (cpu and
// memory by default; NodeResourcesBalancedAllocationArgs) the fraction
// requested/allocatable, then
//
//	score = (1 − standard deviation of the fractions) × 100
//
// A node at 80% cpu and 20% memory scores 70; one at 50% of both, 100. It
// leaves out pods that request none of the resources (best-effort pods:
// they would all pile onto one node), and extended resources the pod does
// not request.
type NodeResourcesBalancedAllocation struct {
	resources []v1.ResourceSpec
	gpus      *ClaimedGPUs
}

var (
	_ framework.PreScorePlugin = (*NodeResourcesBalancedAllocation)(nil)
	_ framework.ScorePlugin    = (*NodeResourcesBalancedAllocation)(nil)
)

// NewBalancedAllocation returns the plugin for args (nil: the defaults).
func NewBalancedAllocation(args *v1.NodeResourcesBalancedAllocationArgs) (*NodeResourcesBalancedAllocation, error) {
	if args == nil {
		args = config.DefaultArgs(BalancedAllocationName).(*v1.NodeResourcesBalancedAllocationArgs)
	}
	valid, err := config.ValidArgs(BalancedAllocationName, args)
	if err != nil {
		return nil, err
	}
	return &NodeResourcesBalancedAllocation{resources: valid.(*v1.NodeResourcesBalancedAllocationArgs).Resources}, nil
}

// Name implements framework.Plugin.
func (*NodeResourcesBalancedAllocation) Name() string { return BalancedAllocationName }

const balancedPreScoreKey = framework.StateKey("PreScore" + BalancedAllocationName)

type balancedState struct{ podRequests []int64 }

func (s *balancedState) Clone() framework.StateData { return s }

func (pl *NodeResourcesBalancedAllocation) podRequests(state *framework.CycleState, pod *api.Pod) []int64 {
	req := podRequestsFromState(state, pod)
	out := make([]int64, len(pl.resources))
	for i, r := range pl.resources {
		out[i] = req.Get(r.Name)
	}
	return out
}

// PreScore implements framework.PreScorePlugin: Skip for a pod that
// requests none of the resources.
func (pl *NodeResourcesBalancedAllocation) PreScore(_ context.Context, state *framework.CycleState, pod *api.Pod, _ []*framework.NodeInfo) *framework.Status {
	reqs := pl.podRequests(state, pod)
	for _, r := range reqs {
		if r != 0 {
			state.Write(balancedPreScoreKey, &balancedState{podRequests: reqs})
			return nil
		}
	}
	return framework.NewStatus(framework.Skip)
}

// Score implements framework.ScorePlugin.
func (pl *NodeResourcesBalancedAllocation) Score(_ context.Context, state *framework.CycleState, pod *api.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	var reqs []int64
	if d, ok := state.Read(balancedPreScoreKey); ok {
		reqs = d.(*balancedState).podRequests
	} else {
		reqs = pl.podRequests(state, pod)
	}
	var fractions [8]float64
	fs := fractions[:0]
	var total float64
	for i, r := range pl.resources {
		alloc := ni.Allocatable.Get(r.Name)
		if r.Name == api.ResourceNvidiaGPU && pl.gpus != nil {
			alloc = pl.gpus.Allocatable(ni)
		}
		isScalar := r.Name != api.ResourceCPU && r.Name != api.ResourceMemory
		if alloc <= 0 || (isScalar && reqs[i] == 0) {
			continue
		}
		f := float64(api.AddAmounts(ni.Requested.Get(r.Name), reqs[i])) / float64(alloc)
		f = min(f, 1)
		total += f
		fs = append(fs, f)
	}
	var std float64
	switch {
	case len(fs) == 2:
		std = math.Abs((fs[0] - fs[1]) / 2)
	case len(fs) > 2:
		mean := total / float64(len(fs))
		var sum float64
		for _, f := range fs {
			sum += (f - mean) * (f - mean)
		}
		std = math.Sqrt(sum / float64(len(fs)))
	}
	return int64((1 - std) * float64(framework.MaxNodeScore)), nil
}

// NormalizeScore implements framework.ScorePlugin: scores are 0..100.
func (*NodeResourcesBalancedAllocation) NormalizeScore(context.Context, *framework.CycleState, *api.Pod, []framework.NodeScore) *framework.Status {
	return nil
}
