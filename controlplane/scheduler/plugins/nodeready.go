package plugins

import (
	"context"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// NodeReady keeps pods off nodes that are not Ready.
//
// Kubernetes has no such filter: its node lifecycle controller puts the
// taint node.kubernetes.io/not-ready (Ready=False) or
// node.kubernetes.io/unreachable (Ready=Unknown, the node stopped
// reporting) on the node, and TaintToleration does the rest. skiff's
// scheduler does not wait for that controller: NodeReady reads the Ready
// condition itself and treats a node that is not Ready as if it carried
// the matching taint with effect NoSchedule. So the rules and the message
// are Kubernetes' ("node(s) had untolerated taint
// {node.kubernetes.io/not-ready: }"), and a pod that tolerates the taint
// (as DaemonSet pods do) may still go there. A node with no Ready condition
// yet (just registered) counts as not-ready.
type NodeReady struct{}

var _ framework.UniformFilterPlugin = (*NodeReady)(nil)

// Name implements framework.Plugin.
func (*NodeReady) Name() string { return NodeReadyName }

// Filter implements framework.FilterPlugin.
func (*NodeReady) Filter(_ context.Context, _ *framework.CycleState, pod *api.Pod, node *framework.NodeInfo) *framework.Status {
	taint := api.Taint{Key: api.TaintNotReady, Effect: api.TaintEffectNoSched}
	switch node.Readiness() { // the Ready condition, read once per node update (framework/nodefacts.go)
	case framework.ReadyTrue:
		return nil
	case framework.ReadyUnknown:
		taint.Key = api.TaintUnreachable
	}
	if TolerationsTolerateTaint(pod.Spec.Tolerations, &taint) {
		return nil
	}
	if taint.Key == api.TaintUnreachable {
		return statusUnreachable
	}
	return statusNotReady
}

// FilterEveryNode implements framework.UniformFilterPlugin: when every
// node is Ready, every node passes.
func (*NodeReady) FilterEveryNode(_ context.Context, _ *framework.CycleState, _ *api.Pod, nodes framework.NodeSummary) (*framework.Status, bool) {
	return nil, nodes.NotReady() == 0
}

// The two rejections, shared by every rejected node (a Status never changes).
var (
	statusNotReady    = framework.NewStatus(framework.UnschedulableAndUnresolvable, UntoleratedTaintReason(&api.Taint{Key: api.TaintNotReady}))
	statusUnreachable = framework.NewStatus(framework.UnschedulableAndUnresolvable, UntoleratedTaintReason(&api.Taint{Key: api.TaintUnreachable}))
)
