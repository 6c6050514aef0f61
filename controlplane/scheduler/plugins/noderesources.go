package plugins

import (
	"context"
	"fmt"
	"math/bits"
	"slices"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// NodeResourcesFit checks that the pod's requests fit what the node has
// left, and scores nodes by how full they would be.
//
// Filter: for cpu, memory and every extended resource (nvidia.com/gpu,
// ephemeral-storage, ...) the pod requests, request ≤ allocatable − the
// requests of the pods already there (bound or assumed); and one more pod
// must fit the node's "pods" allocatable. Requests, not usage: a node whose
// pods are idle is still full. Extended resources are whole units and are
// never oversubscribed: a GPU belongs to one pod. Every missing resource is
// one reason ("Insufficient nvidia.com/gpu"), so one node can count under
// several.
//
// nvidia.com/gpu is one GPU inventory with DRA: the GPUs of driver
// gpu.nvidia.com that ResourceClaims hold on the node (ClaimedGPUs) are
// not the device plugin's to give, so its allocatable is read as
// min(allocatable, capacity − claimed).
//
// Score, by the configured strategy, over the configured resources (each
// resource's score 0..100 weighted by its weight, then averaged):
//
//	LeastAllocated (spread):  (allocatable − requested) × 100 / allocatable
//	MostAllocated (binpack):  requested × 100 / allocatable
//
// where requested includes this pod. A resource the node does not have is
// left out; an extended resource the pod does not request is left out, so
// CPU-only pods are not steered by GPU counts.
type NodeResourcesFit struct {
	strategy ScoringStrategy
	gpus     *ClaimedGPUs // nil: claims are not counted
}

var (
	_ framework.PreFilterPlugin = (*NodeResourcesFit)(nil)
	_ framework.FilterPlugin    = (*NodeResourcesFit)(nil)
	_ framework.ScorePlugin     = (*NodeResourcesFit)(nil)
)

// ScoringStrategyType names a scoring strategy.
type ScoringStrategyType string

// Scoring strategies.
const (
	// LeastAllocated prefers emptier nodes: pods spread out, a node's
	// failure hurts fewer pods. Kubernetes' default.
	LeastAllocated ScoringStrategyType = "LeastAllocated"
	// MostAllocated prefers fuller nodes: pods pack together and whole
	// nodes stay free for big jobs (an 8-GPU training pod). Common for GPUs.
	MostAllocated ScoringStrategyType = "MostAllocated"
)

// ScoringStrategy configures NodeResourcesFit's score.
type ScoringStrategy struct {
	// Type: LeastAllocated (default) or MostAllocated.
	Type ScoringStrategyType `json:"type,omitempty"`
	// Resources scored, with weights 1..100. Empty: cpu and memory, weight 1 each.
	Resources []ResourceWeight `json:"resources,omitempty"`
}

// ResourceWeight is one scored resource.
type ResourceWeight struct {
	Name   string `json:"name"`
	Weight int64  `json:"weight"`
}

// DefaultScoringStrategy is Kubernetes' default: spread by cpu and memory.
func DefaultScoringStrategy() ScoringStrategy {
	return ScoringStrategy{
		Type:      LeastAllocated,
		Resources: []ResourceWeight{{Name: api.ResourceCPU, Weight: 1}, {Name: api.ResourceMemory, Weight: 1}},
	}
}

// Validate lists every problem of the strategy.
func (s ScoringStrategy) Validate() []error {
	var errs []error
	switch s.Type {
	case "", LeastAllocated, MostAllocated:
	default:
		errs = append(errs, fmt.Errorf("scoringStrategy.type: %q is not supported (LeastAllocated, MostAllocated)", s.Type))
	}
	seen := map[string]bool{}
	for i, r := range s.Resources {
		if r.Name == "" {
			errs = append(errs, fmt.Errorf("scoringStrategy.resources[%d].name: required", i))
		}
		if seen[r.Name] {
			errs = append(errs, fmt.Errorf("scoringStrategy.resources[%d].name: %q given twice", i, r.Name))
		}
		seen[r.Name] = true
		if r.Weight < 1 || r.Weight > 100 {
			errs = append(errs, fmt.Errorf("scoringStrategy.resources[%d].weight: %d is not in 1..100", i, r.Weight))
		}
	}
	return errs
}

// NewNodeResourcesFit returns the plugin with a validated strategy.
func NewNodeResourcesFit(s ScoringStrategy) (*NodeResourcesFit, error) {
	if errs := s.Validate(); len(errs) > 0 {
		return nil, errs[0]
	}
	def := DefaultScoringStrategy()
	if s.Type == "" {
		s.Type = def.Type
	}
	if len(s.Resources) == 0 {
		s.Resources = def.Resources
	}
	return &NodeResourcesFit{strategy: s}, nil
}

// Name implements framework.Plugin.
func (*NodeResourcesFit) Name() string { return NodeResourcesFitName }

const fitStateKey framework.StateKey = "PreFilter" + NodeResourcesFitName

// fitState is the pod's total requests, computed once per cycle.
type fitState struct {
	req, nonZero framework.Resource
	scalarNames  []string // sorted, for deterministic reasons
	// single holds a prebuilt status for each one-reason rejection, so the
	// common case allocates nothing per node (read-only after PreFilter).
	single map[string]*framework.Status
}

func (s *fitState) Clone() framework.StateData { return s }

func newFitState(pod *api.Pod) *fitState {
	req, nz := framework.PodRequests(pod)
	st := &fitState{req: req, nonZero: nz}
	for name := range req.Scalar {
		st.scalarNames = append(st.scalarNames, name)
	}
	slices.Sort(st.scalarNames)
	st.single = map[string]*framework.Status{ReasonTooManyPods: framework.NewStatus(framework.Unschedulable, ReasonTooManyPods)}
	for _, name := range append([]string{api.ResourceCPU, api.ResourceMemory}, st.scalarNames...) {
		r := InsufficientReason(name)
		st.single[r] = framework.NewStatus(framework.Unschedulable, r)
	}
	return st
}

func fitStateOf(state *framework.CycleState, pod *api.Pod) *fitState {
	if d, ok := state.Read(fitStateKey); ok {
		return d.(*fitState)
	}
	return newFitState(pod)
}

// podRequestsFromState returns the pod's requests computed by PreFilter
// (or computes them when NodeResourcesFit is not enabled).
func podRequestsFromState(state *framework.CycleState, pod *api.Pod) framework.Resource {
	return fitStateOf(state, pod).req
}

// PreFilter implements framework.PreFilterPlugin: sum the pod's requests once.
func (*NodeResourcesFit) PreFilter(_ context.Context, state *framework.CycleState, pod *api.Pod) *framework.Status {
	state.Write(fitStateKey, newFitState(pod))
	return nil
}

// InsufficientReason is Kubernetes' wording for a resource that does not fit.
func InsufficientReason(resource string) string { return "Insufficient " + resource }

// ReasonTooManyPods is Kubernetes' wording for a node at its pod limit.
const ReasonTooManyPods = "Too many pods"

// Filter implements framework.FilterPlugin.
func (f *NodeResourcesFit) Filter(_ context.Context, state *framework.CycleState, pod *api.Pod, node *framework.NodeInfo) *framework.Status {
	st := fitStateOf(state, pod)
	var buf [4]string
	reasons := buf[:0]
	if int64(len(node.Pods))+1 > node.Allocatable.Pods {
		reasons = append(reasons, ReasonTooManyPods)
	}
	req := &st.req
	if !fits(req.MilliCPU, node.Requested.MilliCPU, node.Allocatable.MilliCPU) {
		reasons = append(reasons, InsufficientReason(api.ResourceCPU))
	}
	if !fits(req.Memory, node.Requested.Memory, node.Allocatable.Memory) {
		reasons = append(reasons, InsufficientReason(api.ResourceMemory))
	}
	for _, name := range st.scalarNames {
		alloc := node.Allocatable.Scalar[name]
		if name == api.ResourceNvidiaGPU && f.gpus != nil {
			alloc = f.gpus.Allocatable(node)
		}
		if !fits(req.Scalar[name], node.Requested.Scalar[name], alloc) {
			reasons = append(reasons, InsufficientReason(name))
		}
	}
	switch len(reasons) {
	case 0:
		return nil
	case 1:
		return st.single[reasons[0]]
	}
	return framework.NewStatus(framework.Unschedulable, reasons...)
}

// fits reports whether want more fits: nothing wanted always fits, and
// otherwise requested + want ≤ allocatable, with the sum saturating (a node
// whose pods hold math.MaxInt64 GPUs between them is full, not empty).
func fits(want, requested, allocatable int64) bool {
	return want <= 0 || api.AddAmounts(requested, want) <= allocatable
}

// Score implements framework.ScorePlugin.
func (f *NodeResourcesFit) Score(_ context.Context, state *framework.CycleState, pod *api.Pod, node *framework.NodeInfo) (int64, *framework.Status) {
	st := fitStateOf(state, pod)
	var score, weights int64
	for _, rw := range f.strategy.Resources {
		alloc := node.Allocatable.Get(rw.Name)
		if rw.Name == api.ResourceNvidiaGPU && f.gpus != nil {
			alloc = f.gpus.Allocatable(node)
		}
		if alloc <= 0 {
			continue
		}
		var requested int64
		switch rw.Name {
		case api.ResourceCPU:
			requested = api.AddAmounts(node.NonZeroRequested.MilliCPU, st.nonZero.MilliCPU)
		case api.ResourceMemory:
			requested = api.AddAmounts(node.NonZeroRequested.Memory, st.nonZero.Memory)
		default:
			podReq := st.req.Get(rw.Name)
			if podReq == 0 {
				continue
			}
			requested = api.AddAmounts(node.Requested.Get(rw.Name), podReq)
		}
		score += resourceScore(f.strategy.Type, requested, alloc) * rw.Weight
		weights += rw.Weight
	}
	if weights == 0 {
		return 0, nil
	}
	return score / weights, nil
}

func resourceScore(t ScoringStrategyType, requested, alloc int64) int64 {
	requested = max(min(requested, alloc), 0)
	if t == MostAllocated {
		return scaled(requested, alloc)
	}
	return scaled(alloc-requested, alloc)
}

// scaled is part × MaxNodeScore / whole for 0 ≤ part ≤ whole, exact even
// where part × MaxNodeScore would overflow an int64 (a node with exabytes).
func scaled(part, whole int64) int64 {
	hi, lo := bits.Mul64(uint64(part), uint64(framework.MaxNodeScore))
	q, _ := bits.Div64(hi, lo, uint64(whole)) // hi < whole: the quotient is at most MaxNodeScore
	return int64(q)
}

// NormalizeScore implements framework.ScorePlugin: scores are already 0..100.
func (*NodeResourcesFit) NormalizeScore(context.Context, *framework.CycleState, *api.Pod, []framework.NodeScore) *framework.Status {
	return nil
}
