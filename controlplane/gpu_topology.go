package controlplane

import (
	"sync"

	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/plugins"
)

// annotationTopology is the scheduler's GPU TopologyProvider: it reads the
// skiff.dev/gpu-topology annotation each agent keeps on its Node (its
// GPUs' link matrix and which GPUs are healthy and free) and rates the
// best set of count free GPUs the node can offer, as the node's device
// plugin would pick it (gpu.PreferredSet), on gpu.SetQuality's 0..100
// scale: NVLink-connected sets 100, PCIe-only ones by their path.
//
// The annotation changes only when the node's devices do, so the parsed
// form is cached per node by the annotation's text: BestSetScore parses
// once per change and is otherwise a map lookup and a small search. Safe
// for concurrent use; it never modifies the node.
type annotationTopology struct {
	mu    sync.Mutex
	cache map[string]parsedTopology // by node name
}

type parsedTopology struct {
	raw string
	ng  *gpu.NodeGPUs // nil: the annotation does not parse
}

var _ plugins.TopologyProvider = (*annotationTopology)(nil)

func newAnnotationTopology() *annotationTopology {
	return &annotationTopology{cache: map[string]parsedTopology{}}
}

// BestSetScore implements plugins.TopologyProvider. A node without the
// annotation (no GPUs, or an agent that does not publish it) is unknown;
// one with fewer free GPUs than count scores 0 (its allocatable, which the
// resources filter checks, may still admit the pod: the annotation lags).
func (a *annotationTopology) BestSetScore(node *api.Node, count int64) (int64, bool) {
	raw, ok := node.Annotations[gpu.AnnotationTopology]
	if !ok || count <= 0 {
		return 0, false
	}
	ng := a.parse(node.Name, raw)
	if ng == nil {
		return 0, false
	}
	if int64(len(ng.Free)) < count {
		return 0, true
	}
	set := gpu.PreferredSet(ng.Topology, ng.Free, nil, int(count))
	if set == nil {
		return 0, true
	}
	return gpu.SetQuality(ng.Topology, set), true
}

func (a *annotationTopology) parse(node, raw string) *gpu.NodeGPUs {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p, ok := a.cache[node]; ok && p.raw == raw {
		return p.ng
	}
	ng, err := gpu.ParseNodeGPUs(raw)
	if err != nil {
		ng = nil
	}
	a.cache[node] = parsedTopology{raw: raw, ng: ng}
	return ng
}
