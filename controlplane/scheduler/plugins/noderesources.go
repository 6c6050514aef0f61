package plugins

import (
	"context"
	"math/bits"
	"slices"
	"strings"

	v1 "k8s.io/kube-scheduler/config/v1"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/config"
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
// On a HAMi node (HAMi's registration annotation) HAMi's per-card
// resources (nvidia.com/gpumem, gpumem-percentage, gpucores, priority)
// are not the node's to count: the HAMi plugin accounts them per card, as
// HAMi's scheduler extender manages them (ignoredByScheduler).
//
// Score, by the configured scoringStrategy (NodeResourcesFitArgs, as
// Kubernetes), over the configured resources (each resource's score
// 0..100 weighted by its weight, then averaged):
//
//	LeastAllocated (spread):  (allocatable − requested) × 100 / allocatable
//	MostAllocated (binpack):  requested × 100 / allocatable
//	RequestedToCapacityRatio: the shape's broken line at requested × 100 / allocatable
//	                          (its 0..10 scores × 10; resources scoring 0 are left out)
//
// where requested includes this pod. A resource the node does not have is
// left out; an extended resource the pod does not request is left out, so
// CPU-only pods are not steered by GPU counts.
//
// ignoredResources and ignoredResourceGroups (extended resources, or
// their domain before the "/") are not checked by Filter: something else
// (a scheduler extender's managedResources) accounts for them.
type NodeResourcesFit struct {
	strategy      v1.ScoringStrategyType
	resources     []v1.ResourceSpec
	shape         []shapePoint // RequestedToCapacityRatio, scores scaled to 0..100
	ignored       map[string]bool
	ignoredGroups map[string]bool
	gpus          *ClaimedGPUs // nil: claims are not counted
}

var (
	_ framework.PreFilterPlugin = (*NodeResourcesFit)(nil)
	_ framework.FilterPlugin    = (*NodeResourcesFit)(nil)
	_ framework.ScorePlugin     = (*NodeResourcesFit)(nil)
)

type shapePoint struct{ utilization, score int64 }

// DefaultFitArgs are NodeResourcesFit's defaults: LeastAllocated over cpu
// and memory, weight 1 each, as Kubernetes.
func DefaultFitArgs() *v1.NodeResourcesFitArgs {
	return config.DefaultArgs(NodeResourcesFitName).(*v1.NodeResourcesFitArgs)
}

// NewNodeResourcesFit returns the plugin for args (nil: the defaults),
// which are defaulted and validated as a configuration's are.
func NewNodeResourcesFit(args *v1.NodeResourcesFitArgs) (*NodeResourcesFit, error) {
	if args == nil {
		args = DefaultFitArgs()
	}
	valid, err := config.ValidArgs(NodeResourcesFitName, args)
	if err != nil {
		return nil, err
	}
	a := valid.(*v1.NodeResourcesFitArgs)
	f := &NodeResourcesFit{strategy: a.ScoringStrategy.Type, resources: a.ScoringStrategy.Resources}
	if r := a.ScoringStrategy.RequestedToCapacityRatio; r != nil {
		for _, pt := range r.Shape {
			f.shape = append(f.shape, shapePoint{utilization: int64(pt.Utilization), score: int64(pt.Score) * (framework.MaxNodeScore / config.MaxCustomPriorityScore)})
		}
	}
	for _, r := range a.IgnoredResources {
		f.ignored = setAdd(f.ignored, r)
	}
	for _, g := range a.IgnoredResourceGroups {
		f.ignoredGroups = setAdd(f.ignoredGroups, g)
	}
	return f, nil
}

func setAdd(m map[string]bool, k string) map[string]bool {
	if m == nil {
		m = map[string]bool{}
	}
	m[k] = true
	return m
}

// isIgnored reports whether Filter leaves the extended resource name to
// something else.
func (f *NodeResourcesFit) isIgnored(name string) bool {
	if f.ignored[name] {
		return true
	}
	if len(f.ignoredGroups) > 0 {
		if dom, _, ok := strings.Cut(name, "/"); ok && f.ignoredGroups[dom] {
			return true
		}
	}
	return false
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
	hami := hamiNodeInfo(node)
	for _, name := range st.scalarNames {
		if f.isIgnored(name) || hami && api.HAMiManagedResource(name) {
			continue
		}
		alloc := node.AllocatableScalar(name)
		if name == api.ResourceNvidiaGPU && f.gpus != nil {
			alloc = f.gpus.allocatableFrom(node, alloc)
		}
		if !fits(req.Scalar[name], node.RequestedScalar(name), alloc) {
			reasons = append(reasons, InsufficientReason(name))
		}
	}
	switch len(reasons) {
	case 0:
		return nil
	case 1:
		return st.single[reasons[0]]
	}
	// A copy: buf stays on the stack (a Status keeps its reasons).
	return framework.NewStatus(framework.Unschedulable, slices.Clone(reasons)...)
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
	for _, rw := range f.resources {
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
		rs := f.resourceScore(requested, alloc)
		if f.strategy == v1.RequestedToCapacityRatio && rs <= 0 {
			continue // as Kubernetes: a resource scoring 0 does not count
		}
		score += rs * rw.Weight
		weights += rw.Weight
	}
	if weights == 0 {
		return 0, nil
	}
	if f.strategy == v1.RequestedToCapacityRatio {
		return (2*score + weights) / (2 * weights), nil // rounded, as Kubernetes' math.Round
	}
	return score / weights, nil
}

func (f *NodeResourcesFit) resourceScore(requested, alloc int64) int64 {
	switch f.strategy {
	case v1.MostAllocated:
		return scaled(max(min(requested, alloc), 0), alloc)
	case v1.RequestedToCapacityRatio:
		if requested > alloc {
			return brokenLinear(f.shape, 100)
		}
		return brokenLinear(f.shape, scaled(max(requested, 0), alloc))
	}
	return scaled(alloc-max(min(requested, alloc), 0), alloc)
}

// brokenLinear is the shape's piecewise linear function at utilization
// p: the first point's score below it, the last's above, a straight line
// between points (Kubernetes' BuildBrokenLinearFunction).
func brokenLinear(shape []shapePoint, p int64) int64 {
	for i, pt := range shape {
		if p <= pt.utilization {
			if i == 0 {
				return pt.score
			}
			prev := shape[i-1]
			return prev.score + (pt.score-prev.score)*(p-prev.utilization)/(pt.utilization-prev.utilization)
		}
	}
	return shape[len(shape)-1].score
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
