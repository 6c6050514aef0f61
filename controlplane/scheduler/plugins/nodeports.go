package plugins

import (
	"context"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// NodePorts rejects nodes where a host port the pod asks for
// (containers[].ports[].hostPort) is already taken by another pod. A port
// is protocol and number; the API has no hostIP, so every port binds all
// addresses.
type NodePorts struct{}

var (
	_ framework.PreFilterPlugin = (*NodePorts)(nil)
	_ framework.FilterPlugin    = (*NodePorts)(nil)
)

// ReasonNodePorts is Kubernetes' wording.
const ReasonNodePorts = "node(s) didn't have free ports for the requested pod ports"

const nodePortsStateKey framework.StateKey = "PreFilter" + NodePortsName

type nodePortsState []framework.HostPort

func (s nodePortsState) Clone() framework.StateData { return s }

// Name implements framework.Plugin.
func (*NodePorts) Name() string { return NodePortsName }

// PreFilter implements framework.PreFilterPlugin: collect the pod's host ports once.
func (*NodePorts) PreFilter(_ context.Context, state *framework.CycleState, pod *api.Pod) *framework.Status {
	state.Write(nodePortsStateKey, nodePortsState(framework.PodHostPorts(pod)))
	return nil
}

// Filter implements framework.FilterPlugin.
func (*NodePorts) Filter(_ context.Context, state *framework.CycleState, pod *api.Pod, node *framework.NodeInfo) *framework.Status {
	var ports []framework.HostPort
	if d, ok := state.Read(nodePortsStateKey); ok {
		ports = d.(nodePortsState)
	} else {
		ports = framework.PodHostPorts(pod)
	}
	for _, p := range ports {
		if node.UsedPorts[p] > 0 {
			return framework.NewStatus(framework.Unschedulable, ReasonNodePorts)
		}
	}
	return nil
}
