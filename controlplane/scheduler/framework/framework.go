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
// A profile (a KubeSchedulerConfiguration's schedulerName) is one
// Framework: the plugins configured at each extension point. One
// scheduling cycle runs the extension points in this order:
//
//	QueueSort  orders the queue: which pod is tried next (one for all profiles)
//	PreFilter  once per pod:   compute what Filter needs; may reject the pod outright
//	Filter     once per node:  can the pod run here? (pass, or a reason)
//	PostFilter when no node passed: make room (preemption) and nominate a node
//	PreScore   once per pod, with the nodes that passed: compute what Score needs
//	Score      once per node that passed: how good is this node? (int64)
//	NormalizeScore once per plugin: map the plugin's scores to 0..MaxNodeScore
//	Reserve    on the chosen node: claim what the pod will use
//	Permit     on the chosen node: bind now, wait (assumed, with a timeout) or reject
//	PreBind    on the binding goroutine: write what binding needs (a claim's allocation)
//	Bind       write the decision to the API (pods/NAME/binding)
//	PostBind   told the pod was bound
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
	"strings"
	"time"

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
// the pod on every node at once ("0/3 nodes are available: REASON."); a
// Skip status says the plugin has nothing to check for this pod: its
// Filter is not run.
type PreFilterPlugin interface {
	Plugin
	PreFilter(ctx context.Context, state *CycleState, pod *api.Pod) *Status
}

// PreFilterExtensions is implemented by PreFilter plugins whose state
// counts pods across nodes (InterPodAffinity, PodTopologySpread): when the
// scheduler imagines a pod added to a node (a nominated pod) or removed
// from it (preemption's victims), it calls AddPod or RemovePod on a clone
// of the cycle state, so that Filter, run on the changed NodeInfo with
// that state, sees the changed counts.
type PreFilterExtensions interface {
	AddPod(ctx context.Context, state *CycleState, podToSchedule *api.Pod, podToAdd *PodInfo, node *NodeInfo) *Status
	RemovePod(ctx context.Context, state *CycleState, podToSchedule *api.Pod, podToRemove *PodInfo, node *NodeInfo) *Status
}

// FilterPlugin decides whether pod can run on node. It returns nil to
// pass, Unschedulable when evicting lower-priority pods could help, and
// UnschedulableAndUnresolvable when nothing on the node could help.
// Filter is called concurrently for different nodes.
type FilterPlugin interface {
	Plugin
	Filter(ctx context.Context, state *CycleState, pod *api.Pod, node *NodeInfo) *Status
}

// UniformFilterPlugin is a FilterPlugin that can sometimes tell, from
// what the cluster's nodes have in common (a NodeSummary), that its Filter
// returns the same on every node: a nodeSelector no node's labels match,
// or a cordon no node has. A pod that fits nowhere is then turned away by
// every node of a 5,000-node cluster without each node being visited
// (Framework.RunFilterEveryNode); the verdict per node, the trace and the
// FailedScheduling message are what the visits would have given.
//
// FilterEveryNode returns (status, true) when Filter returns status on
// every node of nodes (nil: every node passes), and (nil, false) when it
// cannot tell without looking at each node. It may answer only from node
// facts (labels, taints, readiness, cordon), never from the pods on a node:
// pods nominated to a node are not added for it.
type UniformFilterPlugin interface {
	FilterPlugin
	FilterEveryNode(ctx context.Context, state *CycleState, pod *api.Pod, nodes NodeSummary) (*Status, bool)
}

// NodeSummary is what a scheduling cycle's snapshot knows of all its
// nodes at once (scheduler.Snapshot), kept up to date as nodes change.
type NodeSummary interface {
	// NumNodes is how many nodes the snapshot holds.
	NumNodes() int
	// NotReady counts the nodes whose Ready condition is not True
	// (NodeReadiness other than ReadyTrue).
	NotReady() int
	// Cordoned counts the nodes with spec.unschedulable.
	Cordoned() int
	// HardTainted counts the nodes with a NoSchedule or NoExecute taint.
	HardTainted() int
	// NodesWithLabel counts the nodes that carry the label key=value; ok
	// is false when the snapshot cannot tell without visiting its nodes
	// (labels changed since it was taken).
	NodesWithLabel(key, value string) (n int, ok bool)
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

// QueuedPodInfo is a pod waiting in the scheduling queue, as the queue
// sort plugin sees it.
type QueuedPodInfo struct {
	// Info is the pod (shared with the informer: never modify Info.Pod).
	Info *PodInfo
	// Enqueued is when the pod last entered activeQ.
	Enqueued time.Time
}

// QueueSortPlugin orders the pods ready to be tried: Less reports whether
// a goes before b. The scheduler has one queue, so every profile has the
// same, single queue sort plugin (PrioritySort: higher priority first,
// then first come first served). Less must be cheap and must not block.
type QueueSortPlugin interface {
	Plugin
	Less(a, b *QueuedPodInfo) bool
}

// NodeStatus is one node's filter verdict, nil Status when it passed.
type NodeStatus struct {
	Node   string
	Status *Status
}

// PostFilterResult is what a PostFilter plugin did for the pod: the node
// it made room on (nominated: the pod tries it first next time).
type PostFilterResult struct {
	NominatedNodeName string
}

// PostFilterPlugin runs when no node passed the filters, in order until
// one returns Success. DefaultPreemption is the classic one: it looks
// for lower-priority pods whose eviction would make room and nominates
// that node. filtered holds the verdict of every node looked at. An
// Unschedulable status says why it could not help; its message joins the
// FailedScheduling message.
type PostFilterPlugin interface {
	Plugin
	PostFilter(ctx context.Context, state *CycleState, pod *api.Pod, filtered []NodeStatus) (*PostFilterResult, *Status)
}

// PreScorePlugin runs once per pod before Score, with the nodes that
// passed the filters: it computes what Score needs (PodTopologySpread's
// counts per domain). A Skip status turns the plugin's Score off for this
// pod (nothing to score: every node gets 0 from it).
type PreScorePlugin interface {
	Plugin
	PreScore(ctx context.Context, state *CycleState, pod *api.Pod, nodes []*NodeInfo) *Status
}

// PostBindPlugin is told a pod was bound (informational, after Bind).
type PostBindPlugin interface {
	Plugin
	PostBind(ctx context.Context, state *CycleState, pod *api.Pod, nodeName string)
}

// WeightedScorePlugin is a score plugin with its configured weight.
type WeightedScorePlugin struct {
	ScorePlugin
	Weight int64
}

// Extension points, named as in a KubeSchedulerConfiguration profile's
// plugins.
const (
	PointPreEnqueue = "preEnqueue"
	PointQueueSort  = "queueSort"
	PointPreFilter  = "preFilter"
	PointFilter     = "filter"
	PointPostFilter = "postFilter"
	PointPreScore   = "preScore"
	PointScore      = "score"
	PointReserve    = "reserve"
	PointPermit     = "permit"
	PointPreBind    = "preBind"
	PointBind       = "bind"
	PointPostBind   = "postBind"
)

// Points lists the extension points in the order a pod meets them, with
// the interface name Kubernetes' errors use.
var Points = []struct{ Name, Interface string }{
	{PointPreEnqueue, "PreEnqueuePlugin"}, {PointQueueSort, "QueueSortPlugin"},
	{PointPreFilter, "PreFilterPlugin"}, {PointFilter, "FilterPlugin"},
	{PointPostFilter, "PostFilterPlugin"}, {PointPreScore, "PreScorePlugin"},
	{PointScore, "ScorePlugin"}, {PointReserve, "ReservePlugin"},
	{PointPermit, "PermitPlugin"}, {PointPreBind, "PreBindPlugin"},
	{PointBind, "BindPlugin"}, {PointPostBind, "PostBindPlugin"},
}

// Implements reports whether p implements the extension point named point.
func Implements(p Plugin, point string) bool {
	var ok bool
	switch point {
	case PointPreEnqueue:
		_, ok = p.(PreEnqueuePlugin)
	case PointQueueSort:
		_, ok = p.(QueueSortPlugin)
	case PointPreFilter:
		_, ok = p.(PreFilterPlugin)
	case PointFilter:
		_, ok = p.(FilterPlugin)
	case PointPostFilter:
		_, ok = p.(PostFilterPlugin)
	case PointPreScore:
		_, ok = p.(PreScorePlugin)
	case PointScore:
		_, ok = p.(ScorePlugin)
	case PointReserve:
		_, ok = p.(ReservePlugin)
	case PointPermit:
		_, ok = p.(PermitPlugin)
	case PointPreBind:
		_, ok = p.(PreBindPlugin)
	case PointBind:
		_, ok = p.(BindPlugin)
	case PointPostBind:
		_, ok = p.(PostBindPlugin)
	}
	return ok
}

// Framework holds the plugins of each extension point of one profile, in
// the configured order, and runs them.
type Framework struct {
	// ProfileName is the profile's schedulerName.
	ProfileName string
	PreEnqueue  []PreEnqueuePlugin
	QueueSort   []QueueSortPlugin
	PreFilter   []PreFilterPlugin
	Filter      []FilterPlugin
	PostFilter  []PostFilterPlugin
	PreScore    []PreScorePlugin
	Score       []WeightedScorePlugin
	Reserve     []ReservePlugin
	Permit      []PermitPlugin
	PreBind     []PreBindPlugin
	Bind        []BindPlugin
	PostBind    []PostBindPlugin
	// EventSources: plugins with informers of their own.
	EventSources []EventSourcePlugin
	// Waiting holds the pods Permit made wait (permit.go). New makes an
	// empty one; a scheduler replaces it with the one its plugins were
	// given (one for all its profiles), before the first cycle.
	Waiting *WaitingPods
}

// Append adds p at the extension point named point, after those there;
// p must implement it (Implements). weight is a score plugin's weight
// (0: 1); other points ignore it.
func (f *Framework) Append(point string, p Plugin, weight int64) {
	switch point {
	case PointPreEnqueue:
		f.PreEnqueue = append(f.PreEnqueue, p.(PreEnqueuePlugin))
	case PointQueueSort:
		f.QueueSort = append(f.QueueSort, p.(QueueSortPlugin))
	case PointPreFilter:
		f.PreFilter = append(f.PreFilter, p.(PreFilterPlugin))
	case PointFilter:
		f.Filter = append(f.Filter, p.(FilterPlugin))
	case PointPostFilter:
		f.PostFilter = append(f.PostFilter, p.(PostFilterPlugin))
	case PointPreScore:
		f.PreScore = append(f.PreScore, p.(PreScorePlugin))
	case PointScore:
		if weight == 0 {
			weight = 1
		}
		f.Score = append(f.Score, WeightedScorePlugin{ScorePlugin: p.(ScorePlugin), Weight: weight})
	case PointReserve:
		f.Reserve = append(f.Reserve, p.(ReservePlugin))
	case PointPermit:
		f.Permit = append(f.Permit, p.(PermitPlugin))
	case PointPreBind:
		f.PreBind = append(f.PreBind, p.(PreBindPlugin))
	case PointBind:
		f.Bind = append(f.Bind, p.(BindPlugin))
	case PointPostBind:
		f.PostBind = append(f.PostBind, p.(PostBindPlugin))
	}
}

// New puts each plugin at every extension point it implements, in the
// order given (a profile's multiPoint). weights gives each score
// plugin's weight by name (missing or 0: 1). It is the short way to build
// a framework in tests and tools; the scheduler builds its profiles from
// their configuration.
func New(plugins []Plugin, weights map[string]int64) (*Framework, error) {
	f := &Framework{Waiting: NewWaitingPods()}
	seen := map[string]bool{}
	for _, p := range plugins {
		if seen[p.Name()] {
			return nil, fmt.Errorf("plugin %q given twice", p.Name())
		}
		seen[p.Name()] = true
		if es, ok := p.(EventSourcePlugin); ok {
			f.EventSources = append(f.EventSources, es)
		}
		for _, pt := range Points {
			if Implements(p, pt.Name) {
				f.Append(pt.Name, p, weights[p.Name()])
			}
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
// not succeed and returns its status and name. A Skip is not a failure:
// that plugin's Filter is left out for this pod.
func (f *Framework) RunPreFilter(ctx context.Context, state *CycleState, pod *api.Pod) (*Status, string) {
	for _, p := range f.PreFilter {
		s := p.PreFilter(ctx, state, pod)
		if s.Code() == Skip {
			if state.skipFilter == nil {
				state.skipFilter = map[string]bool{}
			}
			state.skipFilter[p.Name()] = true
			continue
		}
		if !s.IsSuccess() {
			return s, p.Name()
		}
	}
	if state.skipFilter != nil {
		// The filters to run, by index, so that RunFilter, once per node,
		// does not look each plugin up in skipFilter.
		state.filterPlan, state.planOf = f.unskipped(state.skipFilter), f
	}
	return nil, ""
}

// unskipped lists the indices in f.Filter of the filters not in skip.
func (f *Framework) unskipped(skip map[string]bool) []int {
	plan := make([]int, 0, len(f.Filter))
	for i, p := range f.Filter {
		if !skip[p.Name()] {
			plan = append(plan, i)
		}
	}
	return plan
}

// RunFilter runs the Filter plugins on one node and stops at the first
// rejection, as Kubernetes does (a node is out as soon as one plugin says
// so). It returns that status and the index of the plugin in f.Filter, or
// (nil, -1) when the node passes.
func (f *Framework) RunFilter(ctx context.Context, state *CycleState, pod *api.Pod, node *NodeInfo) (*Status, int) {
	if state.planOf == f {
		for _, i := range state.filterPlan {
			if s := f.Filter[i].Filter(ctx, state, pod, node); !s.IsSuccess() {
				return s, i
			}
		}
		return nil, -1
	}
	for i, p := range f.Filter {
		if state.skipFilter != nil && state.skipFilter[p.Name()] {
			continue
		}
		if s := p.Filter(ctx, state, pod, node); !s.IsSuccess() {
			return s, i
		}
	}
	return nil, -1
}

// RunFilterEveryNode answers for every node of nodes at once, when it can:
// each filter RunFilter would run, in order, passes on every node
// (UniformFilterPlugin) until one rejects every node. It then returns that
// status and the plugin's index in f.Filter, which is what RunFilter
// returns on each node. ok is false when some filter before a uniform
// rejection cannot answer for all nodes, or none rejects them all: the
// nodes must be filtered one by one. The filters that pass on every node
// are then left out of state's plan, so RunFilter does not ask each node
// what is already known (a node's verdict is the same: a filter left out
// would have passed).
func (f *Framework) RunFilterEveryNode(ctx context.Context, state *CycleState, pod *api.Pod, nodes NodeSummary) (s *Status, plugin int, ok bool) {
	plan := state.filterPlan
	if state.planOf != f {
		plan = f.unskipped(state.skipFilter)
	}
	var unknown []int // the filters that must still visit each node
	for _, i := range plan {
		u, isUniform := f.Filter[i].(UniformFilterPlugin)
		if isUniform {
			st, uniform := u.FilterEveryNode(ctx, state, pod, nodes)
			switch {
			case uniform && st.IsSuccess():
				continue // passes everywhere: out of the plan
			case uniform && st.Code() != Error && len(unknown) == 0:
				return st, i, true // every filter before passed everywhere
			}
		}
		unknown = append(unknown, i)
	}
	if len(unknown) < len(plan) {
		state.filterPlan, state.planOf = unknown, f
	}
	return nil, -1, false
}

// HasPreFilterExtensions reports whether some PreFilter plugin keeps
// counts that AddPod and RemovePod must update.
func (f *Framework) HasPreFilterExtensions() bool {
	for _, p := range f.PreFilter {
		if _, ok := p.(PreFilterExtensions); ok {
			return true
		}
	}
	return false
}

// RunPreFilterAddPod tells the PreFilter plugins that keep counts that
// podToAdd is imagined on node (state is the caller's clone).
func (f *Framework) RunPreFilterAddPod(ctx context.Context, state *CycleState, pod *api.Pod, podToAdd *PodInfo, node *NodeInfo) *Status {
	for _, p := range f.PreFilter {
		if e, ok := p.(PreFilterExtensions); ok && (state.skipFilter == nil || !state.skipFilter[p.Name()]) {
			if s := e.AddPod(ctx, state, pod, podToAdd, node); !s.IsSuccess() {
				return s.WithPlugin(p.Name())
			}
		}
	}
	return nil
}

// RunPreFilterRemovePod is RunPreFilterAddPod for a pod imagined gone.
func (f *Framework) RunPreFilterRemovePod(ctx context.Context, state *CycleState, pod *api.Pod, podToRemove *PodInfo, node *NodeInfo) *Status {
	for _, p := range f.PreFilter {
		if e, ok := p.(PreFilterExtensions); ok && (state.skipFilter == nil || !state.skipFilter[p.Name()]) {
			if s := e.RemovePod(ctx, state, pod, podToRemove, node); !s.IsSuccess() {
				return s.WithPlugin(p.Name())
			}
		}
	}
	return nil
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

// RunPostBind tells every PostBind plugin the pod was bound.
func (f *Framework) RunPostBind(ctx context.Context, state *CycleState, pod *api.Pod, nodeName string) {
	for _, p := range f.PostBind {
		p.PostBind(ctx, state, pod, nodeName)
	}
}

// RunPostFilter runs PostFilter plugins in order until one succeeds and
// returns its result. Otherwise it returns the last rejection, with the
// messages of all rejections joined (each plugin's account of why it
// could not help); nil, nil when there is no PostFilter plugin.
func (f *Framework) RunPostFilter(ctx context.Context, state *CycleState, pod *api.Pod, filtered []NodeStatus) (*PostFilterResult, *Status) {
	var last *Status
	var msgs []string
	for _, p := range f.PostFilter {
		r, s := p.PostFilter(ctx, state, pod, filtered)
		if s.IsSuccess() {
			return r, nil
		}
		if s.Code() == Error {
			return nil, s.WithPlugin(p.Name())
		}
		last = s.WithPlugin(p.Name())
		if m := s.Message(); m != "" {
			msgs = append(msgs, m)
		}
	}
	if last == nil || len(msgs) < 2 {
		return nil, last
	}
	return nil, NewStatus(last.Code(), strings.Join(msgs, "; ")).WithPlugin(last.Plugin())
}

// RunPreScore runs every PreScore plugin and returns, by plugin name, the
// ones that returned Skip (their Score is not run for this pod), or the
// first failure.
func (f *Framework) RunPreScore(ctx context.Context, state *CycleState, pod *api.Pod, nodes []*NodeInfo) (map[string]bool, *Status) {
	var skip map[string]bool
	for _, p := range f.PreScore {
		s := p.PreScore(ctx, state, pod, nodes)
		switch {
		case s.IsSuccess():
		case s.Code() == Skip:
			if skip == nil {
				skip = map[string]bool{}
			}
			skip[p.Name()] = true
		default:
			return nil, s.WithPlugin(p.Name())
		}
	}
	return skip, nil
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
