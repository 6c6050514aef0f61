package plugins

import (
	"context"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// NodeName passes only the node a pod names in spec.nodeName. A pod that
// names its node is already bound and never reaches the scheduler's queue;
// the filter matters when the filters are run for such a pod anyway (a
// what-if simulation, preemption), and it keeps the plugin set the same as
// Kubernetes'.
type NodeName struct{}

var _ framework.UniformFilterPlugin = (*NodeName)(nil)

// ReasonNodeName is Kubernetes' wording.
const ReasonNodeName = "node(s) didn't match the requested node name"

// statusNodeName is shared by every rejected node (a Status never changes).
var statusNodeName = framework.NewStatus(framework.UnschedulableAndUnresolvable, ReasonNodeName)

// Name implements framework.Plugin.
func (*NodeName) Name() string { return NodeNameName }

// Filter implements framework.FilterPlugin.
func (*NodeName) Filter(_ context.Context, _ *framework.CycleState, pod *api.Pod, node *framework.NodeInfo) *framework.Status {
	if pod.Spec.NodeName == "" || pod.Spec.NodeName == node.Node.Name {
		return nil
	}
	return statusNodeName
}

// FilterEveryNode implements framework.UniformFilterPlugin: a pod that
// names no node passes everywhere.
func (*NodeName) FilterEveryNode(_ context.Context, _ *framework.CycleState, pod *api.Pod, _ framework.NodeSummary) (*framework.Status, bool) {
	return nil, pod.Spec.NodeName == ""
}
