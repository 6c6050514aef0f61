package plugins

import (
	"context"
	"sync"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/gputopology"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// GPUTopology prefers nodes where the pod's GPUs can be well connected
// (NVLink, NVSwitch, the same PCIe switch, the same CPU socket). It scores
// only pods that request nvidia.com/gpu; for the others every node gets 0.
//
// It reads what each agent publishes about its GPUs: the
// skiff.dev/gpu-topology annotation on its Node (api/gputopology: the
// link matrix and which GPUs are healthy and free), and rates the best set
// of count free GPUs the node can offer, as the node's device plugin would
// pick it (gputopology.PreferredSet), on gputopology.SetQuality's 0..100
// scale: NVLink-connected sets 100, PCIe-only ones by their path. The
// scheduler only ranks nodes with it; the device plugin's
// GetPreferredAllocation later picks the actual GPUs on the chosen node.
//
// A node without the annotation (no GPUs, or an agent that does not
// publish it) or with one that does not parse scores 0. One with fewer
// free GPUs than asked also scores 0 (its allocatable, which
// NodeResourcesFit checks, may still admit the pod: the annotation lags).
//
// The annotation changes only when the node's devices do, so its parsed
// form is cached per node by the annotation's text: Score parses once per
// change and is otherwise a map lookup and a small search. Safe for
// concurrent use (Score runs on several goroutines at once); it never
// modifies the node.
type GPUTopology struct {
	mu    sync.Mutex
	cache map[string]parsedTopology // by node name
}

type parsedTopology struct {
	raw string
	ng  *gputopology.NodeGPUs // nil: the annotation does not parse
}

var (
	_ framework.PreScorePlugin = (*GPUTopology)(nil)
	_ framework.ScorePlugin    = (*GPUTopology)(nil)
)

// NewGPUTopology returns the plugin.
func NewGPUTopology() *GPUTopology {
	return &GPUTopology{cache: map[string]parsedTopology{}}
}

// Name implements framework.Plugin.
func (*GPUTopology) Name() string { return GPUTopologyName }

// PreScore implements framework.PreScorePlugin: a pod that asks for no
// nvidia.com/gpu scores 0 everywhere, so Score is skipped (the trace
// shows the same zeros).
func (*GPUTopology) PreScore(_ context.Context, state *framework.CycleState, pod *api.Pod, _ []*framework.NodeInfo) *framework.Status {
	if podRequestsFromState(state, pod).Scalar[api.ResourceNvidiaGPU] <= 0 {
		return framework.NewStatus(framework.Skip)
	}
	return nil
}

// Score implements framework.ScorePlugin.
func (g *GPUTopology) Score(_ context.Context, state *framework.CycleState, pod *api.Pod, node *framework.NodeInfo) (int64, *framework.Status) {
	req := podRequestsFromState(state, pod)
	count := req.Scalar[api.ResourceNvidiaGPU]
	if count <= 0 {
		return 0, nil
	}
	if !node.MayHaveAnnotations(topologyBits) {
		return 0, nil // no topology: as bestSetScore's (0, false), without reading the Node
	}
	s, _ := g.bestSetScore(node.Node, count)
	return min(max(s, 0), framework.MaxNodeScore), nil
}

var topologyBits = framework.AnnotationBits(gputopology.AnnotationTopology)

// bestSetScore rates the best set of count free GPUs on node from 0 to
// 100; ok is false when the node's GPU topology is unknown (no
// annotation, or one that does not parse).
func (g *GPUTopology) bestSetScore(node *api.Node, count int64) (score int64, ok bool) {
	raw, found := node.Annotations[gputopology.AnnotationTopology]
	if !found || count <= 0 {
		return 0, false
	}
	ng := g.parse(node.Name, raw)
	if ng == nil {
		return 0, false
	}
	if int64(len(ng.Free)) < count {
		return 0, true
	}
	set := gputopology.PreferredSet(ng.Topology, ng.Free, nil, int(count))
	if set == nil {
		return 0, true
	}
	return gputopology.SetQuality(ng.Topology, set), true
}

func (g *GPUTopology) parse(node, raw string) *gputopology.NodeGPUs {
	g.mu.Lock()
	defer g.mu.Unlock()
	if p, ok := g.cache[node]; ok && p.raw == raw {
		return p.ng
	}
	ng, err := gputopology.ParseNodeGPUs(raw)
	if err != nil {
		ng = nil
	}
	g.cache[node] = parsedTopology{raw: raw, ng: ng}
	return ng
}

// NormalizeScore implements framework.ScorePlugin: scores are already 0..100.
func (*GPUTopology) NormalizeScore(context.Context, *framework.CycleState, *api.Pod, []framework.NodeScore) *framework.Status {
	return nil
}
