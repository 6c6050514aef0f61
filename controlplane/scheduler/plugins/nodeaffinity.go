package plugins

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/kube-scheduler/config/v1"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/config"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// NodeAffinity places pods by node labels.
//
// Filter: the node must carry every label of spec.nodeSelector, and, when
// the pod has requiredDuringSchedulingIgnoredDuringExecution, match at least
// one of its nodeSelectorTerms (terms are ORed, the expressions inside one
// term are ANDed). Operators: In, NotIn, Exists, DoesNotExist, and Gt/Lt,
// which compare the label and the single value as integers (a label that
// is not an integer does not match). matchFields supports metadata.name.
//
// Score: the sum of the weights of the preferred terms the node matches,
// scaled so the best node gets 100.
//
// "IgnoredDuringExecution": a pod already running stays when labels change.
//
// NodeAffinityArgs' addedAffinity applies to every pod of the profile on
// top of its own: a node must match its required terms too ("node(s)
// didn't match scheduler-enforced node affinity"), and its preferred
// terms add to the score.
type NodeAffinity struct {
	added *api.NodeAffinity // nil: none
}

// NewNodeAffinity returns the plugin for args (nil: no added affinity).
func NewNodeAffinity(args *v1.NodeAffinityArgs) (*NodeAffinity, error) {
	if args == nil || args.AddedAffinity == nil {
		return &NodeAffinity{}, nil
	}
	if _, err := config.ValidArgs(NodeAffinityName, args); err != nil {
		return nil, err
	}
	added := &api.NodeAffinity{}
	if err := convertJSON(args.AddedAffinity, added); err != nil {
		return nil, fmt.Errorf("plugin %s: addedAffinity: %w", NodeAffinityName, err)
	}
	return &NodeAffinity{added: added}, nil
}

// convertJSON converts between a Kubernetes type and skiff's twin of it
// (the same JSON field names).
func convertJSON(from, to any) error {
	b, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, to)
}

var (
	_ framework.PreFilterPlugin     = (*NodeAffinity)(nil)
	_ framework.UniformFilterPlugin = (*NodeAffinity)(nil)
	_ framework.PreScorePlugin      = (*NodeAffinity)(nil)
	_ framework.ScorePlugin         = (*NodeAffinity)(nil)
)

const nodeAffinityStateKey framework.StateKey = "PreFilter" + NodeAffinityName

// nodeAffinityState: the bits of the pod's nodeSelector (SelectorBits),
// computed once per cycle.
type nodeAffinityState struct{ selector framework.Bloom }

func (s *nodeAffinityState) Clone() framework.StateData { return s }

// PreFilter implements framework.PreFilterPlugin. As Kubernetes'
// NodeAffinity: a pod with no nodeSelector and no required node affinity,
// in a profile without addedAffinity, has nothing to filter (Skip).
func (pl *NodeAffinity) PreFilter(_ context.Context, state *framework.CycleState, pod *api.Pod) *framework.Status {
	a := pod.Spec.Affinity
	if pl.added == nil && len(pod.Spec.NodeSelector) == 0 &&
		(a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil) {
		return framework.NewStatus(framework.Skip)
	}
	state.Write(nodeAffinityStateKey, &nodeAffinityState{selector: framework.SelectorBits(pod.Spec.NodeSelector)})
	return nil
}

// ReasonNodeAffinity is Kubernetes' wording, for nodeSelector and affinity alike.
const ReasonNodeAffinity = "node(s) didn't match Pod's node affinity/selector"

// ReasonEnforcedNodeAffinity: the node fails the profile's addedAffinity.
const ReasonEnforcedNodeAffinity = "node(s) didn't match scheduler-enforced node affinity"

var statusEnforcedNodeAffinity = framework.NewStatus(framework.UnschedulableAndUnresolvable, ReasonEnforcedNodeAffinity)

// statusNodeAffinity is shared by every rejected node: a Status never
// changes once made, and a pod that fits nowhere is rejected by every node
// of the cluster in every attempt (5,000 allocations per attempt otherwise).
// UnschedulableAndUnresolvable: evicting pods cannot change a label, so
// preemption skips such nodes, and freeing resources does not requeue the pod.
var statusNodeAffinity = framework.NewStatus(framework.UnschedulableAndUnresolvable, ReasonNodeAffinity)

// Name implements framework.Plugin.
func (*NodeAffinity) Name() string { return NodeAffinityName }

// Filter implements framework.FilterPlugin.
func (pl *NodeAffinity) Filter(_ context.Context, state *framework.CycleState, pod *api.Pod, node *framework.NodeInfo) *framework.Status {
	if pl.added != nil && !requiredMatches(pl.added, node.Node) {
		return statusEnforcedNodeAffinity
	}
	if len(pod.Spec.NodeSelector) > 0 && !node.MayHaveLabels(selectorBits(state, pod)) {
		// The node's label bits lack one of the selector's: it certainly
		// does not match, and its labels need not be read (a pod no node
		// fits is filtered against every node of the cluster).
		return statusNodeAffinity
	}
	if !RequiredNodeAffinityMatches(pod, node.Node) {
		return statusNodeAffinity
	}
	return nil
}

// FilterEveryNode implements framework.UniformFilterPlugin: every node
// rejects a pod whose nodeSelector names a label no node carries, or
// whose required terms each need such a label (an In expression none of
// whose values any node has) or are empty. The labs' GPU product a
// cluster lacks is the common case: that pod is turned away by the whole
// cluster in every attempt.
func (pl *NodeAffinity) FilterEveryNode(_ context.Context, _ *framework.CycleState, pod *api.Pod, nodes framework.NodeSummary) (*framework.Status, bool) {
	if pl.added != nil {
		return nil, false
	}
	for k, v := range pod.Spec.NodeSelector {
		if n, ok := nodes.NodesWithLabel(k, v); ok && n == 0 {
			return statusNodeAffinity, true
		}
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil, false
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		if !termMatchesNoNode(&terms[i], nodes) {
			return nil, false
		}
	}
	return statusNodeAffinity, true
}

// termMatchesNoNode reports whether nodes' label counts show that no node
// matches t: it is empty (matches nothing), or one of its In expressions
// names only values no node has for its key.
func termMatchesNoNode(t *api.NodeSelectorTerm, nodes framework.NodeSummary) bool {
	if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
		return true
	}
expressions:
	for i := range t.MatchExpressions {
		r := &t.MatchExpressions[i]
		if r.Operator != "In" {
			continue
		}
		for _, v := range r.Values {
			if n, ok := nodes.NodesWithLabel(r.Key, v); !ok || n > 0 {
				continue expressions
			}
		}
		return true
	}
	return false
}

// selectorBits are the bits of the pod's nodeSelector, from PreFilter's
// state (computed when there is none: preemption's and hints' calls).
func selectorBits(state *framework.CycleState, pod *api.Pod) framework.Bloom {
	if state != nil {
		if d, ok := state.Read(nodeAffinityStateKey); ok {
			return d.(*nodeAffinityState).selector
		}
	}
	return framework.SelectorBits(pod.Spec.NodeSelector)
}

// RequiredNodeAffinityMatches reports whether node satisfies the pod's
// nodeSelector and required node affinity (api.RequiredNodeAffinityMatches).
func RequiredNodeAffinityMatches(pod *api.Pod, node *api.Node) bool {
	return api.RequiredNodeAffinityMatches(&pod.Spec, node)
}

// requiredMatches reports whether node matches one of a's required terms
// (or a has none).
func requiredMatches(a *api.NodeAffinity, node *api.Node) bool {
	return api.RequiredTermsMatch(a, node)
}

// PreScore implements framework.PreScorePlugin. As Kubernetes': with no
// preferred term, neither the pod's nor the profile's, every node would
// score 0, so Score is skipped (the trace shows the same zeros).
func (pl *NodeAffinity) PreScore(_ context.Context, _ *framework.CycleState, pod *api.Pod, _ []*framework.NodeInfo) *framework.Status {
	if hasPreferred(pl.added) {
		return nil
	}
	if a := pod.Spec.Affinity; a != nil && hasPreferred(a.NodeAffinity) {
		return nil
	}
	return framework.NewStatus(framework.Skip)
}

func hasPreferred(a *api.NodeAffinity) bool {
	return a != nil && len(a.PreferredDuringSchedulingIgnoredDuringExecution) > 0
}

// Score implements framework.ScorePlugin.
func (pl *NodeAffinity) Score(_ context.Context, _ *framework.CycleState, pod *api.Pod, node *framework.NodeInfo) (int64, *framework.Status) {
	sum := preferredSum(pl.added, node.Node)
	if a := pod.Spec.Affinity; a != nil {
		sum += preferredSum(a.NodeAffinity, node.Node)
	}
	return sum, nil
}

// preferredSum adds the weights of a's preferred terms node matches.
func preferredSum(a *api.NodeAffinity, node *api.Node) int64 {
	if a == nil {
		return 0
	}
	var sum int64
	for i := range a.PreferredDuringSchedulingIgnoredDuringExecution {
		t := &a.PreferredDuringSchedulingIgnoredDuringExecution[i]
		if t.Weight > 0 && TermMatches(&t.Preference, node) {
			sum += int64(t.Weight)
		}
	}
	return sum
}

// NormalizeScore implements framework.ScorePlugin: the best node gets 100.
func (*NodeAffinity) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *api.Pod, scores []framework.NodeScore) *framework.Status {
	framework.DefaultNormalizeScore(framework.MaxNodeScore, false, scores)
	return nil
}

// TermMatches reports whether node matches every expression and field of
// term (api.NodeSelectorTerm.Matches).
func TermMatches(term *api.NodeSelectorTerm, node *api.Node) bool { return term.Matches(node) }
