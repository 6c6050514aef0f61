// Package plugins holds the scheduler's built-in plugins, one per file,
// named as in Kubernetes where Kubernetes has the same plugin:
//
//	NodeUnschedulable  filter: cordoned nodes (spec.unschedulable) take no new pods
//	NodeName           filter: a pod that names a node fits only that node
//	TaintToleration    filter + score: NoSchedule/NoExecute taints repel, PreferNoSchedule lowers the score
//	NodeReady          filter: only Ready nodes (skiff's; Kubernetes uses taints for this)
//	NodeAffinity       filter + score: nodeSelector, required and preferred node affinity
//	NodePorts          filter: host ports must be free
//	NodeResourcesFit   filter + score: requests must fit allocatable; LeastAllocated or MostAllocated
//	GPUTopology        score: well-connected GPU sets first (a hook the GPU code fills in)
//	DynamicResources   preenqueue + prefilter + filter + reserve + prebind: ResourceClaims (DRA)
//	Coscheduling       prefilter + permit + reserve: a PodGroup's pods run all together or not at all
//	DefaultBinder      bind: POST pods/NAME/binding
//
// A plugin is a small struct made by its factory from Args; Registry maps
// each name to its factory. The scheduler's configuration chooses which run.
package plugins

import (
	"fmt"
	"log/slog"
	"slices"

	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// Plugin names.
const (
	NodeUnschedulableName = "NodeUnschedulable"
	NodeNameName          = "NodeName"
	TaintTolerationName   = "TaintToleration"
	NodeReadyName         = "NodeReady"
	NodeAffinityName      = "NodeAffinity"
	NodePortsName         = "NodePorts"
	NodeResourcesFitName  = "NodeResourcesFit"
	GPUTopologyName       = "GPUTopology"
	DynamicResourcesName  = "DynamicResources"
	CoschedulingName      = "Coscheduling"
	DefaultBinderName     = "DefaultBinder"
)

// Args are what plugin factories may need. Zero values are fine except
// where a plugin says otherwise.
type Args struct {
	// Client is used by DefaultBinder (required for it).
	Client client.Interface
	// ScoringStrategy of NodeResourcesFit; the zero value is LeastAllocated
	// over cpu and memory.
	ScoringStrategy ScoringStrategy
	// Logger for plugins that log (DynamicResources); nil discards.
	Logger *slog.Logger
	// PodGroups, WaitingPods and Activate are the scheduler's handle for
	// Coscheduling (required for it): pod groups and their members, the
	// pods waiting at Permit, and a way to have queued pods tried now.
	PodGroups   PodGroupLister
	WaitingPods *framework.WaitingPods
	Activate    func(keys []string)
	// ClaimedGPUs: the GPUs ResourceClaims hold per node, kept by
	// DynamicResources and subtracted from nvidia.com/gpu by
	// NodeResourcesFit (one GPU inventory); nil: not counted.
	ClaimedGPUs *ClaimedGPUs
}

// Factory makes a plugin.
type Factory func(args Args) (framework.Plugin, error)

// Registry returns the factory of every built-in plugin, by name. It
// returns a new map each call: add out-of-tree plugins to it freely.
func Registry() map[string]Factory {
	return map[string]Factory{
		NodeUnschedulableName: func(Args) (framework.Plugin, error) { return &NodeUnschedulable{}, nil },
		NodeNameName:          func(Args) (framework.Plugin, error) { return &NodeName{}, nil },
		TaintTolerationName:   func(Args) (framework.Plugin, error) { return &TaintToleration{}, nil },
		NodeReadyName:         func(Args) (framework.Plugin, error) { return &NodeReady{}, nil },
		NodeAffinityName:      func(Args) (framework.Plugin, error) { return &NodeAffinity{}, nil },
		NodePortsName:         func(Args) (framework.Plugin, error) { return &NodePorts{}, nil },
		NodeResourcesFitName: func(a Args) (framework.Plugin, error) {
			p, err := NewNodeResourcesFit(a.ScoringStrategy)
			if err != nil {
				return nil, err
			}
			p.gpus = a.ClaimedGPUs
			return p, nil
		},
		GPUTopologyName: func(Args) (framework.Plugin, error) { return NewGPUTopology(), nil },
		DynamicResourcesName: func(a Args) (framework.Plugin, error) {
			if a.Client == nil {
				return nil, fmt.Errorf("%s needs a client", DynamicResourcesName)
			}
			pl := NewDynamicResources(a.Client, a.Logger)
			pl.gpus = a.ClaimedGPUs
			return pl, nil
		},
		CoschedulingName: func(a Args) (framework.Plugin, error) {
			return NewCoscheduling(a.PodGroups, a.WaitingPods, a.Activate)
		},
		DefaultBinderName: func(a Args) (framework.Plugin, error) {
			if a.Client == nil {
				return nil, fmt.Errorf("%s needs a client", DefaultBinderName)
			}
			return &DefaultBinder{Client: a.Client}, nil
		},
	}
}

// Names lists the built-in plugins, sorted.
func Names() []string {
	var out []string
	for n := range Registry() {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
