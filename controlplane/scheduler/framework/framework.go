// Package framework defines the scheduler's extension points, the plugin
// interfaces that fill them, and what plugins see: a CycleState, a
// NodeInfo per node and a Status to answer with. It is a small copy of
// Kubernetes' scheduling framework (k8s.io/kubernetes/pkg/scheduler/framework),
// with the same names, so what students read here applies there.
//
// Before a pod enters the active queue, and each time it would go back to
// it, PreEnqueue decides whether it may be tried at all (its claims exist):
//
//	PreEnqueue once per enqueue: may the pod be tried? (no: it waits, gated)
//
// One scheduling cycle runs the extension points in this order:
//
//	PreFilter  once per pod:   compute what Filter needs; may reject the pod outright
//	Filter     once per node:  can the pod run here? (pass, or a reason)
//	Score      once per node that passed: how good is this node? (int64)
//	NormalizeScore once per plugin: map the plugin's scores to 0..MaxNodeScore
//	Reserve    on the chosen node: claim what the pod will use
//	Permit     on the chosen node: bind now, wait (assumed, with a timeout) or reject
//	PreBind    on the binding goroutine: write what binding needs (a claim's allocation)
//	Bind       write the decision to the API (pods/NAME/binding)
//
// Unreserve undoes Reserve when anything after it fails (a Permit
// rejection or timeout included).
//
// A pod that Permit holds waits off the scheduling loop: it stays assumed
// on its node (its resources counted, so no other pod takes them) while
// the loop goes on with other pods; it is bound once every waiting plugin
// has allowed it, and unreserved and requeued when one rejects it or its
// time runs out (WaitingPods, as Kubernetes' waitingPodsMap).
//
// Plugins are values made once per scheduler; they must be safe for
// concurrent use, because Filter and Score run on several goroutines at
// once (one node each). They must not block or do I/O, except Bind.
package framework

import (
	"context"
	"fmt"

	"skiff.dev/skiff/api"
)

// MaxNodeScore is the top of the normalised score range 0..100.
const MaxNodeScore int64 = 100

// Plugin is anything with a name. The name is used in configuration and
// explanations.
type Plugin interface {
	Name() string
}

// PreEnqueuePlugin gates a pod before it enters the active queue: a
// non-success status keeps it waiting among the unschedulable pods (with
// the status's message, "pod \"NS/P\": ResourceClaim not created yet")
// until a cluster event moves it, when PreEnqueue runs again. It runs
// under the queue's lock: it must be quick and must not call the queue.
type PreEnqueuePlugin interface {
	Plugin
	PreEnqueue(ctx context.Context, pod *api.Pod) *Status
}

// PreFilterPlugin runs once per pod before any Filter. It usually computes
// something from the pod and stores it in state. A rejecting status fails
// the pod on every node at once ("0/3 nodes are available: REASON.").
type PreFilterPlugin interface {
	Plugin
	PreFilter(ctx context.Context, state *CycleState, pod *api.Pod) *Status
}

// FilterPlugin decides whether pod can run on node. It returns nil to
// pass, Unschedulable when evicting lower-priority pods could help, and
// UnschedulableAndUnresolvable when nothing on the node could help.
// Filter is called concurrently for different nodes.
type FilterPlugin interface {
	Plugin
	Filter(ctx context.Context, state *CycleState, pod *api.Pod, node *NodeInfo) *Status
}

// ScorePlugin ranks the nodes that passed every filter. Score returns a raw
// number for one node (called concurrently for different nodes);
// NormalizeScore then maps all raw scores of this pod to 0..MaxNodeScore in
// place (called once). The scheduler multiplies the normalised score by the
// plugin's configured weight and sums over plugins; the highest sum wins.
type ScorePlugin interface {
	Plugin
	Score(ctx context.Context, state *CycleState, pod *api.Pod, node *NodeInfo) (int64, *Status)
	NormalizeScore(ctx context.Context, state *CycleState, pod *api.Pod, scores []NodeScore) *Status
}

// NodeScore is one node's score from one plugin.
type NodeScore struct {
	Name  string
	Score int64
}

// ReservePlugin claims node-local things for the pod on the chosen node
// before binding (the scheduler itself has already counted the pod's
// resources on the node: "assumed"). Unreserve must undo Reserve and be
// safe to call even if Reserve did not run or failed; it is called when
// a later Reserve plugin or Bind fails.
type ReservePlugin interface {
	Plugin
	Reserve(ctx context.Context, state *CycleState, pod *api.Pod, nodeName string) *Status
	Unreserve(ctx context.Context, state *CycleState, pod *api.Pod, nodeName string)
}

// PreBindPlugin runs after Permit, before Bind, on the binding goroutine:
// it may do I/O (the DynamicResources plugin writes the claims'
// allocation and reservedFor). A failure unreserves the pod and retries it
// after its backoff, as a failed Bind.
type PreBindPlugin interface {
	Plugin
	PreBind(ctx context.Context, state *CycleState, pod *api.Pod, nodeName string) *Status
}

// EventSourcePlugin is a plugin that watches cluster objects of its own
// (the DynamicResources plugin: ResourceClaims, DeviceClasses,
// ResourceSlices). The scheduler runs it beside its own informers and
// waits for WaitForSync before the first cycle; the plugin calls moved
// when a change may let waiting pods fit (Kubernetes' EnqueueExtensions,
// coarsely: every waiting pod is retried).
type EventSourcePlugin interface {
	Plugin
	Run(ctx context.Context, moved func())
	WaitForSync(ctx context.Context) bool
}

// BindPlugin writes the decision. It may block (it does I/O) and runs on a
// binding goroutine, not the scheduling loop. The first bind plugin that
// does not return a Skip status decides.
type BindPlugin interface {
	Plugin
	Bind(ctx context.Context, state *CycleState, pod *api.Pod, nodeName string) *Status
}

// WeightedScorePlugin is a score plugin with its configured weight.
type WeightedScorePlugin struct {
	ScorePlugin
	Weight int64
}

// Framework holds the plugins of each extension point, in the configured
// order, and runs them.
type Framework struct {
	PreEnqueue []PreEnqueuePlugin
	PreFilter  []PreFilterPlugin
	Filter     []FilterPlugin
	Score      []WeightedScorePlugin
	Reserve    []ReservePlugin
	Permit     []PermitPlugin
	PreBind    []PreBindPlugin
	Bind       []BindPlugin
	// EventSources: plugins with informers of their own.
	EventSources []EventSourcePlugin
	// Waiting holds the pods Permit made wait (permit.go). New makes an
	// empty one; a scheduler replaces it with the one its plugins were
	// given, before the first cycle.
	Waiting *WaitingPods
}

// New sorts plugins into the extension points they implement. weights
// gives each score plugin's weight by name (missing or 0: 1).
func New(plugins []Plugin, weights map[string]int64) (*Framework, error) {
	f := &Framework{Waiting: NewWaitingPods()}
	seen := map[string]bool{}
	for _, p := range plugins {
		if seen[p.Name()] {
			return nil, fmt.Errorf("plugin %q given twice", p.Name())
		}
		seen[p.Name()] = true
		if pe, ok := p.(PreEnqueuePlugin); ok {
			f.PreEnqueue = append(f.PreEnqueue, pe)
		}
		if es, ok := p.(EventSourcePlugin); ok {
			f.EventSources = append(f.EventSources, es)
		}
		if pb, ok := p.(PreBindPlugin); ok {
			f.PreBind = append(f.PreBind, pb)
		}
		if pf, ok := p.(PreFilterPlugin); ok {
			f.PreFilter = append(f.PreFilter, pf)
		}
		if fp, ok := p.(FilterPlugin); ok {
			f.Filter = append(f.Filter, fp)
		}
		if sp, ok := p.(ScorePlugin); ok {
			w := weights[p.Name()]
			if w == 0 {
				w = 1
			}
			f.Score = append(f.Score, WeightedScorePlugin{ScorePlugin: sp, Weight: w})
		}
		if rp, ok := p.(ReservePlugin); ok {
			f.Reserve = append(f.Reserve, rp)
		}
		if pp, ok := p.(PermitPlugin); ok {
			f.Permit = append(f.Permit, pp)
		}
		if bp, ok := p.(BindPlugin); ok {
			f.Bind = append(f.Bind, bp)
		}
	}
	if len(f.Bind) == 0 {
		return nil, fmt.Errorf("no bind plugin enabled: pods could never be bound")
	}
	return f, nil
}

// RunPreEnqueue runs every PreEnqueue plugin; it stops at the first that
// does not succeed and returns its status, naming the plugin.
func (f *Framework) RunPreEnqueue(ctx context.Context, pod *api.Pod) *Status {
	for _, p := range f.PreEnqueue {
		if s := p.PreEnqueue(ctx, pod); !s.IsSuccess() {
			return s.WithPlugin(p.Name())
		}
	}
	return nil
}

// RunPreBind runs every PreBind plugin in order and stops at the first
// failure, returning its status naming the plugin.
func (f *Framework) RunPreBind(ctx context.Context, state *CycleState, pod *api.Pod, nodeName string) *Status {
	for _, p := range f.PreBind {
		if s := p.PreBind(ctx, state, pod, nodeName); !s.IsSuccess() {
			return s.WithPlugin(p.Name())
		}
	}
	return nil
}

// RunPreFilter runs every PreFilter plugin; it stops at the first that does
// not succeed and returns its status and name.
func (f *Framework) RunPreFilter(ctx context.Context, state *CycleState, pod *api.Pod) (*Status, string) {
	for _, p := range f.PreFilter {
		if s := p.PreFilter(ctx, state, pod); !s.IsSuccess() {
			return s, p.Name()
		}
	}
	return nil, ""
}

// RunFilter runs the Filter plugins on one node and stops at the first
// rejection, as Kubernetes does (a node is out as soon as one plugin says
// so). It returns that status and the index of the plugin in f.Filter, or
// (nil, -1) when the node passes.
func (f *Framework) RunFilter(ctx context.Context, state *CycleState, pod *api.Pod, node *NodeInfo) (*Status, int) {
	for i, p := range f.Filter {
		if s := p.Filter(ctx, state, pod, node); !s.IsSuccess() {
			return s, i
		}
	}
	return nil, -1
}

// RunReserve runs Reserve plugins in order; on a failure it unreserves
// those already run (in reverse) and returns the status.
func (f *Framework) RunReserve(ctx context.Context, state *CycleState, pod *api.Pod, nodeName string) *Status {
	for i, p := range f.Reserve {
		if s := p.Reserve(ctx, state, pod, nodeName); !s.IsSuccess() {
			for j := i; j >= 0; j-- {
				f.Reserve[j].Unreserve(ctx, state, pod, nodeName)
			}
			return s
		}
	}
	return nil
}

// RunUnreserve runs every Unreserve, in reverse order.
func (f *Framework) RunUnreserve(ctx context.Context, state *CycleState, pod *api.Pod, nodeName string) {
	for i := len(f.Reserve) - 1; i >= 0; i-- {
		f.Reserve[i].Unreserve(ctx, state, pod, nodeName)
	}
}

// RunBind runs bind plugins until one does not skip.
func (f *Framework) RunBind(ctx context.Context, state *CycleState, pod *api.Pod, nodeName string) *Status {
	for _, p := range f.Bind {
		if s := p.Bind(ctx, state, pod, nodeName); s.Code() != Skip {
			return s
		}
	}
	return NewStatus(Error, "no bind plugin bound the pod")
}

// DefaultNormalizeScore scales scores so the highest becomes maxScore
// (and, with reverse, so the lowest raw score gets maxScore: "fewer is
// better"). All zero stays zero (or becomes maxScore with reverse).
func DefaultNormalizeScore(maxScore int64, reverse bool, scores []NodeScore) {
	var highest int64
	for _, s := range scores {
		highest = max(highest, s.Score)
	}
	for i := range scores {
		if highest == 0 {
			if reverse {
				scores[i].Score = maxScore
			}
			continue
		}
		scores[i].Score = maxScore * scores[i].Score / highest
		if reverse {
			scores[i].Score = maxScore - scores[i].Score
		}
	}
}
