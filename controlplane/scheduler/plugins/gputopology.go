package plugins

import (
	"context"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// TopologyProvider knows how the GPUs inside each node are connected
// (NVLink, NVSwitch, PCIe switch, CPU socket) and which are free, and
// ranks what a node can offer a pod that wants count GPUs.
//
// This is the hook the GPU code fills in. Its implementation will read
// what the agents publish about their GPUs (the device plugin's topology,
// the simulated servers' NVLink matrix) and answer: "the best free set of
// 2 GPUs on node-3 shares an NVLink bridge: 100", "on node-5 the best pair
// crosses sockets: 20". The scheduler only ranks nodes with it; the
// device plugin's GetPreferredAllocation later picks the actual GPUs on
// the chosen node.
//
// BestSetScore must be fast, must not block or do I/O (it runs once per
// feasible node per pod, on several goroutines at once) and must be safe
// for concurrent use. node is shared: never modify it. Return a score from
// 0 (worst) to 100 (best) and ok=true, or ok=false when the node's
// topology is unknown: such a node scores 0.
type TopologyProvider interface {
	BestSetScore(node *api.Node, count int64) (score int64, ok bool)
}

// NoTopology is the TopologyProvider used until the GPU code provides one:
// it knows nothing, so every node scores the same and the plugin changes
// no decision.
type NoTopology struct{}

// BestSetScore implements TopologyProvider.
func (NoTopology) BestSetScore(*api.Node, int64) (int64, bool) { return 0, false }

// GPUTopology prefers nodes where the pod's GPUs can be well connected.
// It scores only pods that request nvidia.com/gpu; for the others every
// node gets 0.
type GPUTopology struct {
	provider TopologyProvider
}

var _ framework.ScorePlugin = (*GPUTopology)(nil)

// NewGPUTopology returns the plugin; a nil provider means NoTopology.
func NewGPUTopology(p TopologyProvider) *GPUTopology {
	if p == nil {
		p = NoTopology{}
	}
	return &GPUTopology{provider: p}
}

// Name implements framework.Plugin.
func (*GPUTopology) Name() string { return GPUTopologyName }

// Score implements framework.ScorePlugin.
func (g *GPUTopology) Score(_ context.Context, state *framework.CycleState, pod *api.Pod, node *framework.NodeInfo) (int64, *framework.Status) {
	req := podRequestsFromState(state, pod)
	count := req.Scalar[api.ResourceNvidiaGPU]
	if count <= 0 {
		return 0, nil
	}
	s, ok := g.provider.BestSetScore(node.Node, count)
	if !ok {
		return 0, nil
	}
	return min(max(s, 0), framework.MaxNodeScore), nil
}

// NormalizeScore implements framework.ScorePlugin: scores are already 0..100.
func (*GPUTopology) NormalizeScore(context.Context, *framework.CycleState, *api.Pod, []framework.NodeScore) *framework.Status {
	return nil
}
