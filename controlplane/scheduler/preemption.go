package scheduler

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/kube-scheduler/config/v1"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/config"
	"skiff.dev/skiff/controlplane/scheduler/framework"
	"skiff.dev/skiff/controlplane/scheduler/plugins"
)

// Preemption: when a pod fits nowhere, maybe it would fit if some pods of
// lower priority made room. For each node, the scheduler imagines the node
// without every lower-priority pod and runs the filters again; if the pod
// fits, it puts pods back one by one, most important first, keeping each
// one that still leaves room. What could not be put back are the victims:
// the smallest set of the least important pods. Among the nodes that work,
// it picks the one whose most important victim is least important, then
// the one with fewest victims, then the lowest sum of victim priorities,
// then the first by name.
//
// The scheduler then deletes the victims (their Preempted events say by
// whom), sets the pod's status.nominatedNodeName to the node, and puts the
// pod back in the queue: it is scheduled when the victims are gone. Until
// then the nominated pod counts on that node for pods of lower priority,
// so they cannot take the room it was given.
//
// Nodes rejected for a reason eviction cannot fix (a label, a taint) are
// skipped: "Preemption is not helpful for scheduling". A pod with
// preemptionPolicy: Never never preempts. Priority is spec.priority
// (default 0); pods of equal priority never preempt each other.

// PreemptionResult is what preemption found for one pod.
type PreemptionResult struct {
	// Node where evicting Victims makes the pod fit; "" when there is none.
	Node string
	// Victims to evict on Node, lowest priority first.
	Victims []*framework.PodInfo
	// Message is the sentence added to FailedScheduling when preemption
	// could not help: "preemption: 0/3 nodes are available: ...".
	Message string
	// Nodes: each node's outcome (Status nil for the nodes that would work).
	// Empty when no node could be helped at all (every node was rejected
	// for a reason eviction cannot fix): then no node was searched.
	Nodes []NodePreemption
}

// NodePreemption is one node's preemption outcome.
type NodePreemption struct {
	Node    string
	Victims []string
	Status  *framework.Status
}

// Preemption messages, as in Kubernetes.
const (
	ReasonPreemptionNotHelpful = "Preemption is not helpful for scheduling"
	ReasonNoVictims            = "No preemption victims found for incoming pod"
	msgPolicyNever             = "preemption: not eligible due to preemptionPolicy=Never"
	msgTerminatingOnNominated  = "preemption: not eligible due to a terminating pod on the nominated node"
)

// PreemptNever is the preemptionPolicy that turns preemption off for a pod.
const PreemptNever = "Never"

// DefaultPreemptionName is the PostFilter plugin that preempts.
const DefaultPreemptionName = "DefaultPreemption"

// defaultPreemption is Kubernetes' DefaultPreemption: the scheduler's
// preemption search as a PostFilter plugin, so a profile turns it off the
// way Kubernetes' does (postFilter: disabled: [{name: DefaultPreemption}]).
// Its args (DefaultPreemptionArgs) bound how many candidate nodes it looks
// for: max(minCandidateNodesPercentage% of the nodes,
// minCandidateNodesAbsolute), then it picks the best of those.
type defaultPreemption struct {
	minPct, minAbs int32
}

var _ framework.PostFilterPlugin = (*defaultPreemption)(nil)

func newDefaultPreemption(a plugins.Args) (framework.Plugin, error) {
	args, _ := a.PluginArgs.(*v1.DefaultPreemptionArgs)
	if a.PluginArgs != nil && args == nil {
		return nil, fmt.Errorf("plugin %s: args of kind %q, want DefaultPreemptionArgs", DefaultPreemptionName, a.PluginArgs.GetObjectKind().GroupVersionKind().Kind)
	}
	if args == nil {
		args = config.DefaultArgs(DefaultPreemptionName).(*v1.DefaultPreemptionArgs)
	}
	valid, err := config.ValidArgs(DefaultPreemptionName, args)
	if err != nil {
		return nil, err
	}
	args = valid.(*v1.DefaultPreemptionArgs)
	return &defaultPreemption{minPct: *args.MinCandidateNodesPercentage, minAbs: *args.MinCandidateNodesAbsolute}, nil
}

func (*defaultPreemption) Name() string { return DefaultPreemptionName }

// numCandidates is how many nodes where preemption works are enough to
// choose from, as Kubernetes' calculateNumCandidates.
func (p *defaultPreemption) numCandidates(numNodes int) int {
	n := numNodes * int(p.minPct) / 100
	n = max(n, int(p.minAbs))
	return min(n, numNodes)
}

// PostFilter implements framework.PostFilterPlugin.
func (p *defaultPreemption) PostFilter(ctx context.Context, state *framework.CycleState, pod *api.Pod, _ []framework.NodeStatus) (*framework.PostFilterResult, *framework.Status) {
	d, ok := state.Read(cycleKey)
	if !ok {
		return nil, framework.NewStatus(framework.Error, "DefaultPreemption runs only inside skiff's scheduler")
	}
	c := d.(*cycleData)
	pr, err := c.a.preempt(ctx, state, pod, c.snap, c.res, p.numCandidates(len(c.snap.Nodes())))
	if err != nil {
		return nil, framework.AsStatus(err)
	}
	c.res.Preemption = pr
	if pr.Node == "" {
		return nil, framework.NewStatus(framework.Unschedulable, pr.Message)
	}
	return &framework.PostFilterResult{NominatedNodeName: pr.Node}, nil
}

// preempt looks for a node where evicting lower-priority pods lets pod fit,
// among the first enough nodes where it works. It only computes; the
// scheduler acts on the result.
func (a *algorithm) preempt(ctx context.Context, state *framework.CycleState, pod *api.Pod, snap *Snapshot, res *CycleResult, enough int) (*PreemptionResult, error) {
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == PreemptNever {
		return &PreemptionResult{Message: msgPolicyNever}, nil
	}
	prio := framework.PodPriority(pod)
	if nn := pod.Status.NominatedNodeName; nn != "" {
		if ni := snap.Get(nn); ni != nil {
			for _, p := range ni.Pods {
				if p.Pod.DeletionTimestamp != nil && p.Priority < prio {
					return &PreemptionResult{Message: msgTerminatingOnNominated}, nil
				}
			}
		}
	}
	if n := len(snap.Nodes()); notHelpfulAnywhere(res, n) {
		// Kubernetes' shortcut: no candidate node, so no search at all.
		return &PreemptionResult{Message: fmt.Sprintf("preemption: 0/%d nodes are available: %d %s", n, n, ReasonPreemptionNotHelpful)}, nil
	}
	statusOf := make(map[string]*framework.Status, len(res.Nodes))
	for _, r := range res.Nodes {
		statusOf[r.Node] = r.Status
	}
	pr := &PreemptionResult{}
	type candidate struct {
		node    string
		victims []*framework.PodInfo
	}
	var cands []candidate
	notHelpful := framework.NewStatus(framework.UnschedulableAndUnresolvable, ReasonPreemptionNotHelpful)
	for _, ni := range snap.Nodes() {
		name := ni.Node.Name
		st, ok := statusOf[name]
		if res.PreFilterStatus != nil {
			st, ok = res.PreFilterStatus, true
		}
		if ok && st.Code() == framework.UnschedulableAndUnresolvable {
			pr.Nodes = append(pr.Nodes, NodePreemption{Node: name, Status: notHelpful})
			continue
		}
		victims, s := a.selectVictims(ctx, state, pod, prio, ni)
		if s.Code() == framework.Error {
			return nil, fmt.Errorf("preemption on node %q: %w", name, s.AsError())
		}
		np := NodePreemption{Node: name, Status: s}
		for _, v := range victims {
			np.Victims = append(np.Victims, v.Key)
		}
		pr.Nodes = append(pr.Nodes, np)
		if s.IsSuccess() {
			cands = append(cands, candidate{node: name, victims: victims})
			if len(cands) >= enough {
				break
			}
		}
	}
	if len(cands) > 0 && len(a.extenders) > 0 {
		victims := map[string][]*framework.PodInfo{}
		for _, c := range cands {
			victims[c.node] = c.victims
		}
		kept, err := a.extenderPreemption(ctx, pod, victims)
		if err != nil {
			return nil, err
		}
		cands = slices.DeleteFunc(cands, func(c candidate) bool { _, ok := kept[c.node]; return !ok })
		for i := range cands {
			cands[i].victims = kept[cands[i].node]
		}
	}
	if len(cands) == 0 {
		var hist []NodeFilterResult
		for _, n := range pr.Nodes {
			hist = append(hist, NodeFilterResult{Node: n.Node, Status: n.Status})
		}
		pr.Message = fmt.Sprintf("preemption: 0/%d nodes are available: %s", len(snap.Nodes()), reasonHistogram(hist))
		return pr, nil
	}
	best := slices.MinFunc(cands, func(x, y candidate) int {
		if c := cmp.Compare(highestPriority(x.victims), highestPriority(y.victims)); c != 0 {
			return c
		}
		if c := cmp.Compare(len(x.victims), len(y.victims)); c != 0 {
			return c
		}
		if c := cmp.Compare(sumPriority(x.victims), sumPriority(y.victims)); c != 0 {
			return c
		}
		return strings.Compare(x.node, y.node)
	})
	pr.Node, pr.Victims = best.node, best.victims
	return pr, nil
}

// notHelpfulAnywhere reports whether the attempt rejected every one of the
// snapshot's n nodes for a reason eviction cannot fix (a PreFilter
// rejection or a Filter status of UnschedulableAndUnresolvable: a label,
// a taint, a cordon). Then preemption has no candidate and is skipped; this
// is the common case of a pod that can never schedule (a nodeSelector no
// node matches), which would otherwise pay a second pass over the cluster
// on every attempt for the same answer.
func notHelpfulAnywhere(res *CycleResult, n int) bool {
	if res.PreFilterStatus != nil {
		return res.PreFilterStatus.Code() == framework.UnschedulableAndUnresolvable
	}
	if len(res.Nodes) != n {
		return false
	}
	for _, r := range res.Nodes {
		if r.Status.Code() != framework.UnschedulableAndUnresolvable {
			return false
		}
	}
	return true
}

// selectVictims finds the fewest, least important pods on ni whose
// eviction lets pod fit. A non-success status says why no set works.
func (a *algorithm) selectVictims(ctx context.Context, state *framework.CycleState, pod *api.Pod, prio int32, ni *framework.NodeInfo) ([]*framework.PodInfo, *framework.Status) {
	var potential []*framework.PodInfo
	for _, p := range ni.Pods {
		if p.Priority < prio {
			potential = append(potential, p)
		}
	}
	if len(potential) == 0 {
		return nil, a.noVictims
	}
	sim := a.withNominated(pod, ni)
	if sim == ni {
		sim = ni.Clone()
	}
	// The PreFilter plugins that count pods (InterPodAffinity,
	// PodTopologySpread) are told of every imagined change, on a copy.
	st := state
	if a.extensions {
		st = state.Clone()
		for _, p := range a.nominatedFor(pod, ni) {
			if s := a.fwk.RunPreFilterAddPod(ctx, st, pod, p, sim); !s.IsSuccess() {
				return nil, framework.NewStatus(framework.Error, s.Message())
			}
		}
	}
	remove := func(p *framework.PodInfo) *framework.Status {
		sim.RemovePod(p.Key)
		if a.extensions {
			return a.fwk.RunPreFilterRemovePod(ctx, st, pod, p, sim)
		}
		return nil
	}
	add := func(p *framework.PodInfo) *framework.Status {
		sim.AddPod(p)
		if a.extensions {
			return a.fwk.RunPreFilterAddPod(ctx, st, pod, p, sim)
		}
		return nil
	}
	for _, p := range potential {
		if s := remove(p); !s.IsSuccess() {
			return nil, framework.NewStatus(framework.Error, s.Message())
		}
	}
	if s, _ := a.fwk.RunFilter(ctx, st, pod, sim); !s.IsSuccess() {
		return nil, s
	}
	// Put back the most important pods first; those that no longer fit are victims.
	slices.SortStableFunc(potential, func(x, y *framework.PodInfo) int {
		if c := cmp.Compare(y.Priority, x.Priority); c != 0 {
			return c
		}
		return strings.Compare(x.Key, y.Key)
	})
	var victims []*framework.PodInfo
	for _, p := range potential {
		if s := add(p); !s.IsSuccess() {
			return nil, framework.NewStatus(framework.Error, s.Message())
		}
		if s, _ := a.fwk.RunFilter(ctx, st, pod, sim); !s.IsSuccess() {
			if s := remove(p); !s.IsSuccess() {
				return nil, framework.NewStatus(framework.Error, s.Message())
			}
			victims = append(victims, p)
		}
	}
	slices.Reverse(victims) // lowest priority first
	return victims, nil
}

func highestPriority(pods []*framework.PodInfo) int32 {
	var h int32 = -1 << 31
	for _, p := range pods {
		h = max(h, p.Priority)
	}
	return h
}

func sumPriority(pods []*framework.PodInfo) int64 {
	var s int64
	for _, p := range pods {
		s += int64(p.Priority)
	}
	return s
}
