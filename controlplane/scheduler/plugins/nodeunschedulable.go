package plugins

import (
	"context"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// NodeUnschedulable rejects cordoned nodes (spec.unschedulable: true, set by
// `skiff cordon` and `skiff drain`), unless the pod tolerates the taint
// node.kubernetes.io/unschedulable:NoSchedule, as DaemonSet pods do.
type NodeUnschedulable struct{}

var _ framework.UniformFilterPlugin = (*NodeUnschedulable)(nil)

// ReasonNodeUnschedulable is Kubernetes' wording.
const ReasonNodeUnschedulable = "node(s) were unschedulable"

// statusNodeUnschedulable is shared by every rejected node (a Status never changes).
var statusNodeUnschedulable = framework.NewStatus(framework.UnschedulableAndUnresolvable, ReasonNodeUnschedulable)

// Name implements framework.Plugin.
func (*NodeUnschedulable) Name() string { return NodeUnschedulableName }

// Filter implements framework.FilterPlugin.
func (*NodeUnschedulable) Filter(_ context.Context, _ *framework.CycleState, pod *api.Pod, node *framework.NodeInfo) *framework.Status {
	if !node.Unschedulable() || toleratesCordon(pod) {
		return nil
	}
	return statusNodeUnschedulable
}

// toleratesCordon reports whether pod tolerates the taint a cordoned node
// stands for (node.kubernetes.io/unschedulable:NoSchedule).
func toleratesCordon(pod *api.Pod) bool {
	taint := api.Taint{Key: api.TaintUnschedulable, Effect: api.TaintEffectNoSched}
	return TolerationsTolerateTaint(pod.Spec.Tolerations, &taint)
}

// FilterEveryNode implements framework.UniformFilterPlugin: no node is
// cordoned, or the pod tolerates the cordon, so every node passes; or
// every node is cordoned (a drained cluster) and every node rejects.
func (*NodeUnschedulable) FilterEveryNode(_ context.Context, _ *framework.CycleState, pod *api.Pod, nodes framework.NodeSummary) (*framework.Status, bool) {
	cordoned := nodes.Cordoned()
	if cordoned == 0 || toleratesCordon(pod) {
		return nil, true
	}
	if cordoned == nodes.NumNodes() {
		return statusNodeUnschedulable, true
	}
	return nil, false
}
