package gputopology

import (
	"encoding/json"
	"fmt"
)

// Node annotations (and a label) an agent publishes about its GPUs, so that the
// scheduler can rank nodes by the GPU sets they can still offer, and
// `skiff describe node` can say which pod holds which GPU. The agent
// rewrites them whenever a GPU's health or an allocation changes.
const (
	// AnnotationTopology holds a NodeGPUs in JSON.
	AnnotationTopology = "skiff.dev/gpu-topology"
	// AnnotationAllocations holds a JSON object from GPU UUID to the pod
	// ("namespace/name") the device manager gave it to.
	AnnotationAllocations = "skiff.dev/gpu-allocations"
	// LabelSimulated ("true") marks a node whose GPUs are simulated
	// (agent/gpu's simulator), beside GPU feature discovery's labels.
	LabelSimulated = "skiff.dev/gpu.simulated"
)

// FaultResult is the answer of a node agent's POST /gpus/{index}/fault
// (`skiff gpu fault`, through the nodes/proxy subresource): the GPU after
// the fault was injected or cleared.
type FaultResult struct {
	Node    string `json:"node"`
	Index   int    `json:"index"`
	UUID    string `json:"uuid,omitempty"`
	Healthy bool   `json:"healthy"`
	Xid     uint64 `json:"xid,omitempty"`
	// Reason is a sentence for people: "Xid 79: GPU has fallen off the bus".
	Reason string `json:"reason"`
}

// NodeGPUs is the value of AnnotationTopology: the node's GPUs, the link
// matrix between them, and which are healthy and free (healthy and held by
// no pod). Indexes are those of Devices and of the Topology's rows.
type NodeGPUs struct {
	Devices  []NodeGPU `json:"devices"`
	Topology *Topology `json:"topology"`
	Healthy  []int     `json:"healthy"`
	Free     []int     `json:"free"`
}

// NodeGPU is one GPU in NodeGPUs.
type NodeGPU struct {
	Index   int    `json:"index"`
	UUID    string `json:"uuid"`
	Name    string `json:"name"`
	Healthy bool   `json:"healthy"`
	// LastXid is the last Xid error (0: none).
	LastXid uint64 `json:"lastXid,omitempty"`
}

// ParseNodeGPUs reads an AnnotationTopology value, checking that the
// matrix covers the devices and the indexes are in range.
func ParseNodeGPUs(s string) (*NodeGPUs, error) {
	var n NodeGPUs
	if err := json.Unmarshal([]byte(s), &n); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", AnnotationTopology, err)
	}
	if n.Topology == nil {
		n.Topology = NewTopology(0)
	}
	if n.Topology.N() != len(n.Devices) || len(n.Topology.NUMANodes) != n.Topology.N() || len(n.Topology.CPUAffinity) != n.Topology.N() {
		return nil, fmt.Errorf("annotation %s: topology of %d GPUs for %d devices", AnnotationTopology, n.Topology.N(), len(n.Devices))
	}
	for i, row := range n.Topology.Links {
		if len(row) != n.Topology.N() {
			return nil, fmt.Errorf("annotation %s: topology row %d has %d links, want %d", AnnotationTopology, i, len(row), n.Topology.N())
		}
	}
	for _, list := range [][]int{n.Healthy, n.Free} {
		for _, i := range list {
			if i < 0 || i >= len(n.Devices) {
				return nil, fmt.Errorf("annotation %s: GPU index %d out of range", AnnotationTopology, i)
			}
		}
	}
	return &n, nil
}

// ParseAllocations reads an AnnotationAllocations value.
func ParseAllocations(s string) (map[string]string, error) {
	out := map[string]string{}
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", AnnotationAllocations, err)
	}
	return out, nil
}

// SetQuality rates a set of GPUs from 0 to 100 by how they talk to each
// other: the mean over its pairs of PairScore capped at 100, so a pair
// joined by NVLink counts 100 and a PCIe-only pair its PCIe score (PIX 50
// ... SYS 10). A set of one GPU rates 100 (nothing to connect), an empty
// set 0. Unlike SetScore it compares sets of any size and nodes of any
// kind on one scale: the scheduler's GPU topology score.
func SetQuality(t *Topology, set []int) int64 {
	switch len(set) {
	case 0:
		return 0
	case 1:
		return 100
	}
	var sum, pairs int64
	for a := range set {
		for b := a + 1; b < len(set); b++ {
			sum += int64(min(PairScore(t, set[a], set[b]), 100))
			pairs++
		}
	}
	return sum / pairs
}
