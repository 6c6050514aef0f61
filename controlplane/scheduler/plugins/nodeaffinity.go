package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

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
	_ framework.FilterPlugin = (*NodeAffinity)(nil)
	_ framework.ScorePlugin  = (*NodeAffinity)(nil)
)

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
func (pl *NodeAffinity) Filter(_ context.Context, _ *framework.CycleState, pod *api.Pod, node *framework.NodeInfo) *framework.Status {
	if pl.added != nil && !requiredMatches(pl.added, node.Node) {
		return statusEnforcedNodeAffinity
	}
	if !RequiredNodeAffinityMatches(pod, node.Node) {
		return statusNodeAffinity
	}
	return nil
}

// RequiredNodeAffinityMatches reports whether node satisfies the pod's
// nodeSelector and required node affinity.
func RequiredNodeAffinityMatches(pod *api.Pod, node *api.Node) bool {
	for k, v := range pod.Spec.NodeSelector {
		if got, ok := node.Labels[k]; !ok || got != v {
			return false
		}
	}
	a := pod.Spec.Affinity
	if a == nil {
		return true
	}
	return requiredMatches(a.NodeAffinity, node)
}

// requiredMatches reports whether node matches one of a's required terms
// (or a has none).
func requiredMatches(a *api.NodeAffinity, node *api.Node) bool {
	if a == nil || a.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	for i := range a.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if TermMatches(&a.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[i], node) {
			return true
		}
	}
	return false
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
// term. A term with neither matches nothing, as in Kubernetes.
func TermMatches(term *api.NodeSelectorTerm, node *api.Node) bool {
	if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
		return false
	}
	for i := range term.MatchExpressions {
		r := &term.MatchExpressions[i]
		v, ok := node.Labels[r.Key]
		if !requirementMatches(r, v, ok) {
			return false
		}
	}
	for i := range term.MatchFields {
		r := &term.MatchFields[i]
		if r.Key != "metadata.name" || !requirementMatches(r, node.Name, true) {
			return false
		}
	}
	return true
}

// requirementMatches applies one operator to a label value (has: whether the
// label exists).
func requirementMatches(r *api.NodeSelectorRequirement, value string, has bool) bool {
	switch r.Operator {
	case "In":
		return has && slices.Contains(r.Values, value)
	case "NotIn":
		return !has || !slices.Contains(r.Values, value)
	case "Exists":
		return has
	case "DoesNotExist":
		return !has
	case "Gt", "Lt":
		if !has || len(r.Values) != 1 {
			return false
		}
		got, err1 := strconv.ParseInt(value, 10, 64)
		want, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == "Gt" {
			return got > want
		}
		return got < want
	}
	return false
}
