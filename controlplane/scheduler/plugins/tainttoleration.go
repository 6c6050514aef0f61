package plugins

import (
	"context"
	"fmt"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// TaintToleration keeps pods off nodes whose taints they do not tolerate.
//
// Filter: a taint with effect NoSchedule or NoExecute that no toleration
// matches rejects the node. Score: each PreferNoSchedule taint the pod does
// not tolerate is a mark against the node; fewer marks score higher.
//
// A toleration matches a taint when the effects match (an empty effect
// matches all), and the keys match (an empty key with operator Exists
// matches every key), and either the operator is Exists or the values are
// equal (operator Equal, the default).
type TaintToleration struct{}

var (
	_ framework.UniformFilterPlugin = (*TaintToleration)(nil)
	_ framework.ScorePlugin         = (*TaintToleration)(nil)
)

// Name implements framework.Plugin.
func (*TaintToleration) Name() string { return TaintTolerationName }

// UntoleratedTaintReason is Kubernetes' wording for a taint a pod does not
// tolerate: "node(s) had untolerated taint {key: value}".
func UntoleratedTaintReason(t *api.Taint) string {
	return fmt.Sprintf("node(s) had untolerated taint {%s: %s}", t.Key, t.Value)
}

// Filter implements framework.FilterPlugin.
func (*TaintToleration) Filter(_ context.Context, _ *framework.CycleState, pod *api.Pod, node *framework.NodeInfo) *framework.Status {
	if node.TaintEffects()&(framework.TaintNoSchedule|framework.TaintNoExecute) == 0 {
		return nil // most nodes: no taint to read
	}
	for i := range node.Node.Spec.Taints {
		t := &node.Node.Spec.Taints[i]
		if t.Effect != api.TaintEffectNoSched && t.Effect != api.TaintEffectNoExec {
			continue
		}
		if !TolerationsTolerateTaint(pod.Spec.Tolerations, t) {
			return framework.NewStatus(framework.UnschedulableAndUnresolvable, UntoleratedTaintReason(t))
		}
	}
	return nil
}

// FilterEveryNode implements framework.UniformFilterPlugin: with no
// NoSchedule or NoExecute taint on any node, every node passes.
func (*TaintToleration) FilterEveryNode(_ context.Context, _ *framework.CycleState, _ *api.Pod, nodes framework.NodeSummary) (*framework.Status, bool) {
	return nil, nodes.HardTainted() == 0
}

// Score implements framework.ScorePlugin: the number of PreferNoSchedule
// taints the pod does not tolerate (lower is better; NormalizeScore turns
// it around).
func (*TaintToleration) Score(_ context.Context, _ *framework.CycleState, pod *api.Pod, node *framework.NodeInfo) (int64, *framework.Status) {
	if node.TaintEffects()&framework.TaintPreferNoSchedule == 0 {
		return 0, nil
	}
	var n int64
	for i := range node.Node.Spec.Taints {
		t := &node.Node.Spec.Taints[i]
		if t.Effect != api.TaintEffectPrefNo {
			continue
		}
		tolerated := false
		for j := range pod.Spec.Tolerations {
			tol := &pod.Spec.Tolerations[j]
			if (tol.Effect == "" || tol.Effect == api.TaintEffectPrefNo) && ToleratesTaint(tol, t) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			n++
		}
	}
	return n, nil
}

// NormalizeScore implements framework.ScorePlugin: the node with the most
// intolerable taints gets 0, a node with none gets 100.
func (*TaintToleration) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *api.Pod, scores []framework.NodeScore) *framework.Status {
	framework.DefaultNormalizeScore(framework.MaxNodeScore, true, scores)
	return nil
}

// ToleratesTaint reports whether one toleration matches a taint
// (api.Toleration.Tolerates).
func ToleratesTaint(tol *api.Toleration, t *api.Taint) bool { return tol.Tolerates(t) }

// TolerationsTolerateTaint reports whether any toleration matches the taint.
func TolerationsTolerateTaint(tols []api.Toleration, t *api.Taint) bool {
	return api.TolerationsTolerate(tols, t)
}
