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
//
// # Nodes without a pod network
//
// A node whose agent runs without a pod network (label
// skiff.dev/pod-network=none, api.LabelSkiffPodNetwork) has its pods share
// the node's network namespace, as if every pod had hostNetwork: there a
// containerPort is a port of the node. So on such a node the plugin counts
// each pod's containerPorts as host ports too, and two pods that declare
// the same containerPort do not fit one node: the second stays Pending with
// Kubernetes' "didn't have free ports" reason rather than crash-looping on
// a port its sibling holds. Simulated nodes (skiff.dev/simulated=true) run
// no processes and bind nothing: they are exempt.
type NodePorts struct{}

var (
	_ framework.PreFilterPlugin = (*NodePorts)(nil)
	_ framework.FilterPlugin    = (*NodePorts)(nil)
)

// ReasonNodePorts is Kubernetes' wording.
const ReasonNodePorts = "node(s) didn't have free ports for the requested pod ports"

const nodePortsStateKey framework.StateKey = "PreFilter" + NodePortsName

// nodePortsState is the pod's ports, collected once per cycle: host ports,
// and the ports it binds when it shares the node's network.
type nodePortsState struct {
	host, shared []framework.HostPort
}

func (s nodePortsState) Clone() framework.StateData { return s }

// Name implements framework.Plugin.
func (*NodePorts) Name() string { return NodePortsName }

// PreFilter implements framework.PreFilterPlugin: collect the pod's host ports once.
func (*NodePorts) PreFilter(_ context.Context, state *framework.CycleState, pod *api.Pod) *framework.Status {
	ports := podPorts(pod)
	if len(ports.shared) == 0 { // shared holds the host ports too
		// No port to check on any node: Skip, as Kubernetes' NodePorts
		// does for a pod without host ports (its Filter is not run).
		return framework.NewStatus(framework.Skip)
	}
	state.Write(nodePortsStateKey, ports)
	return nil
}

// Filter implements framework.FilterPlugin.
func (*NodePorts) Filter(_ context.Context, state *framework.CycleState, pod *api.Pod, node *framework.NodeInfo) *framework.Status {
	var ports nodePortsState
	if d, ok := state.Read(nodePortsStateKey); ok {
		ports = d.(nodePortsState)
	} else {
		ports = podPorts(pod)
	}
	if len(ports.shared) == 0 {
		return nil // no ports at all (shared holds the host ports too)
	}
	if node.MayHaveLabels(podNetworkNoneBits) && sharesNodeNetwork(node.Node) {
		return sharedPortsFit(ports.shared, node)
	}
	for _, p := range ports.host {
		if node.UsedPorts[p] > 0 {
			return framework.NewStatus(framework.Unschedulable, ReasonNodePorts)
		}
	}
	return nil
}

// sharesNodeNetwork: the node's pods run in its network namespace (no pod
// network) and bind real ports (not simulated).
var podNetworkNoneBits = framework.LabelBits(api.LabelSkiffPodNetwork, api.PodNetworkNone)

func sharesNodeNetwork(n *api.Node) bool {
	return n != nil && n.Labels[api.LabelSkiffPodNetwork] == api.PodNetworkNone && n.Labels[api.LabelSkiffSimulated] != "true"
}

// sharedPortsFit checks the ports a pod binds on a node without a pod
// network against those of the pods already there (the node's pods are
// few: they are read each time rather than kept in the NodeInfo).
func sharedPortsFit(want []framework.HostPort, node *framework.NodeInfo) *framework.Status {
	if len(want) == 0 {
		return nil
	}
	used := map[framework.HostPort]bool{}
	for _, p := range node.Pods {
		for _, hp := range podPorts(p.Pod).shared {
			used[hp] = true
		}
	}
	for _, p := range want {
		if used[p] {
			return framework.NewStatus(framework.Unschedulable, ReasonNodePorts)
		}
	}
	return nil
}

// podPorts lists a pod's host ports, and the ports it binds when it shares
// the node's network: its host ports and its containerPorts.
func podPorts(pod *api.Pod) nodePortsState {
	s := nodePortsState{host: framework.PodHostPorts(pod)}
	s.shared = append(append(s.shared, s.host...), framework.PodContainerPorts(pod)...)
	return s
}
