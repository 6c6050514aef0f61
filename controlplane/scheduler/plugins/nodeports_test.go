package plugins

import (
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// On a node without a pod network every containerPort is a port of the
// node: two pods declaring the same one do not fit; with a pod network,
// or on a simulated node, only hostPorts count.
func TestNodePortsWithoutPodNetwork(t *testing.T) {
	withNetwork := func(mode string, simulated bool) *api.Node {
		return testNode("n1", nil, func(n *api.Node) {
			n.Labels[api.LabelSkiffPodNetwork] = mode
			if simulated {
				n.Labels[api.LabelSkiffSimulated] = "true"
			}
		})
	}
	ports := func(ps ...api.ContainerPort) func(*api.Pod) {
		return func(p *api.Pod) { p.Spec.Containers[0].Ports = ps }
	}
	nginx := func(name string) *api.Pod { return testPod(name, ports(api.ContainerPort{ContainerPort: 80})) }
	none, cni, simNone := withNetwork(api.PodNetworkNone, false), withNetwork(api.PodNetworkCNI, false), withNetwork(api.PodNetworkNone, true)
	unlabelled := testNode("n1", nil)
	tests := []struct {
		name  string
		pod   *api.Pod
		node  *framework.NodeInfo
		code  framework.Code
		taken bool
	}{
		{"none: same containerPort taken", nginx("b"), nodeInfo(none, nginx("a")), framework.Unschedulable, true},
		{"none: first pod fits", nginx("a"), nodeInfo(none), framework.Success, false},
		{"none: other port fits", testPod("b", ports(api.ContainerPort{ContainerPort: 8080})), nodeInfo(none, nginx("a")), framework.Success, false},
		{"none: other protocol fits", testPod("b", ports(api.ContainerPort{ContainerPort: 80, Protocol: "UDP"})), nodeInfo(none, nginx("a")), framework.Success, false},
		{"none: containerPort against a hostPort", nginx("b"), nodeInfo(none, testPod("a", ports(api.ContainerPort{ContainerPort: 8080, HostPort: 80}))), framework.Unschedulable, true},
		{"none: no ports fits", testPod("b"), nodeInfo(none, nginx("a")), framework.Success, false},
		{"cni: same containerPort fits", nginx("b"), nodeInfo(cni, nginx("a")), framework.Success, false},
		{"cni: hostPort still counts", testPod("b", ports(api.ContainerPort{ContainerPort: 80, HostPort: 8080})), nodeInfo(cni, testPod("a", ports(api.ContainerPort{ContainerPort: 81, HostPort: 8080}))), framework.Unschedulable, true},
		{"no label (sim-nodes, older agent): same containerPort fits", nginx("b"), nodeInfo(unlabelled, nginx("a")), framework.Success, false},
		{"simulated node without network: fits", nginx("b"), nodeInfo(simNone, nginx("a")), framework.Success, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var reasons []string
			if tt.taken {
				reasons = []string{ReasonNodePorts}
			}
			checkStatus(t, runFilter(t, &NodePorts{}, tt.pod, tt.node), tt.code, reasons...)
			// Without PreFilter's state (preemption's dry runs) the answer is the same.
			checkStatus(t, (&NodePorts{}).Filter(t.Context(), framework.NewCycleState(), tt.pod, tt.node), tt.code, reasons...)
		})
	}
}
