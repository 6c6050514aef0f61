// Package plugins holds the scheduler's built-in plugins, one per file,
// named as in Kubernetes where Kubernetes has the same plugin:
//
//	NodeUnschedulable  filter: cordoned nodes (spec.unschedulable) take no new pods
//	NodeName           filter: a pod that names a node fits only that node
//	TaintToleration    filter + score: NoSchedule/NoExecute taints repel, PreferNoSchedule lowers the score
//	NodeReady          filter: only Ready nodes (skiff's; Kubernetes uses taints for this)
//	NodeAffinity       filter + score: nodeSelector, required and preferred node affinity
//	NodePorts          filter: host ports must be free
//	PrioritySort       queueSort: higher priority first, then first come first served
//	NodeResourcesFit   filter + score: requests must fit allocatable; LeastAllocated, MostAllocated or RequestedToCapacityRatio
//	NodeResourcesBalancedAllocation  score: resources used evenly (cpu and memory alike)
//	PodTopologySpread  filter + score: spread matching pods over nodes, zones, NVLink domains
//	InterPodAffinity   filter + score: near (podAffinity) or away from (podAntiAffinity) other pods
//	GPUTopology        score: well-connected GPU sets first (a hook the GPU code fills in)
//	HAMi               prefilter + filter + score + reserve + prebind: HAMi's vGPU slices (nvidia.com/gpumem, gpucores)
//	DynamicResources   preenqueue + prefilter + filter + reserve + prebind: ResourceClaims (DRA)
//	VolumeBinding      prefilter + filter + reserve + prebind: PersistentVolumeClaims, volumes' node affinity
//	Coscheduling       prefilter + permit + reserve: a PodGroup's pods run all together or not at all
//	DefaultBinder      bind: POST pods/NAME/binding
//	FewestPods         score: the emptiest node first; in no profile by default: the template of a plugin of your own
//
// A plugin is a small struct made by its factory from Args (the
// scheduler's handle and the plugin's own args from the profile's
// pluginConfig); Registry maps each name to its factory. The scheduler's
// configuration (a KubeSchedulerConfiguration profile) chooses which run
// where. DefaultPreemption lives in the scheduler package: it is the
// scheduler's own search, made a PostFilter plugin.
package plugins

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	v1 "k8s.io/kube-scheduler/config/v1"

	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/scheduler/config"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// Plugin names.
const (
	NodeUnschedulableName  = "NodeUnschedulable"
	NodeNameName           = "NodeName"
	TaintTolerationName    = "TaintToleration"
	NodeReadyName          = "NodeReady"
	NodeAffinityName       = "NodeAffinity"
	NodePortsName          = "NodePorts"
	NodeResourcesFitName   = "NodeResourcesFit"
	GPUTopologyName        = "GPUTopology"
	DynamicResourcesName   = "DynamicResources"
	VolumeBindingName      = "VolumeBinding"
	CoschedulingName       = "Coscheduling"
	DefaultBinderName      = "DefaultBinder"
	PrioritySortName       = "PrioritySort"
	PodTopologySpreadName  = "PodTopologySpread"
	InterPodAffinityName   = "InterPodAffinity"
	BalancedAllocationName = "NodeResourcesBalancedAllocation"
	// HAMiName is in hami.go.
)

// Args are what plugin factories may need. Zero values are fine except
// where a plugin says otherwise.
type Args struct {
	// PluginArgs are the plugin's own arguments from the profile's
	// pluginConfig, typed and defaulted by package config
	// (*v1.NodeResourcesFitArgs, *config.CoschedulingArgs, ...); nil when
	// none were given and the plugin has no args kind.
	PluginArgs runtime.Object
	// Client is used by DefaultBinder (required for it).
	Client client.Interface
	// Logger for plugins that log (DynamicResources); nil discards.
	Logger *slog.Logger
	// Informers: the scheduler's informer factory (the process's shared
	// one when it has it), whose caches plugins with informers
	// (DynamicResources) read; nil: informers of their own.
	Informers *client.InformerFactory
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
		NodeUnschedulableName: noArgs(NodeUnschedulableName, func(Args) (framework.Plugin, error) { return &NodeUnschedulable{}, nil }),
		NodeNameName:          noArgs(NodeNameName, func(Args) (framework.Plugin, error) { return &NodeName{}, nil }),
		TaintTolerationName:   noArgs(TaintTolerationName, func(Args) (framework.Plugin, error) { return &TaintToleration{}, nil }),
		NodeReadyName:         noArgs(NodeReadyName, func(Args) (framework.Plugin, error) { return &NodeReady{}, nil }),
		NodeAffinityName: func(a Args) (framework.Plugin, error) {
			args, err := argsAs[*v1.NodeAffinityArgs](NodeAffinityName, a.PluginArgs)
			if err != nil {
				return nil, err
			}
			return NewNodeAffinity(args)
		},
		PodTopologySpreadName: func(a Args) (framework.Plugin, error) {
			args, err := argsAs[*v1.PodTopologySpreadArgs](PodTopologySpreadName, a.PluginArgs)
			if err != nil {
				return nil, err
			}
			return NewPodTopologySpreadShared(args, a.Client, a.Informers, a.Logger)
		},
		InterPodAffinityName: func(a Args) (framework.Plugin, error) {
			args, err := argsAs[*v1.InterPodAffinityArgs](InterPodAffinityName, a.PluginArgs)
			if err != nil {
				return nil, err
			}
			return NewInterPodAffinityShared(args, a.Client, a.Informers, a.Logger)
		},
		BalancedAllocationName: func(a Args) (framework.Plugin, error) {
			args, err := argsAs[*v1.NodeResourcesBalancedAllocationArgs](BalancedAllocationName, a.PluginArgs)
			if err != nil {
				return nil, err
			}
			p, err := NewBalancedAllocation(args)
			if err != nil {
				return nil, err
			}
			p.gpus = a.ClaimedGPUs
			return p, nil
		},
		FewestPodsName:   noArgs(FewestPodsName, func(Args) (framework.Plugin, error) { return &FewestPods{}, nil }),
		PrioritySortName: noArgs(PrioritySortName, func(Args) (framework.Plugin, error) { return &PrioritySort{}, nil }),
		NodePortsName:    noArgs(NodePortsName, func(Args) (framework.Plugin, error) { return &NodePorts{}, nil }),
		NodeResourcesFitName: func(a Args) (framework.Plugin, error) {
			args, err := argsAs[*v1.NodeResourcesFitArgs](NodeResourcesFitName, a.PluginArgs)
			if err != nil {
				return nil, err
			}
			p, err := NewNodeResourcesFit(args)
			if err != nil {
				return nil, err
			}
			p.gpus = a.ClaimedGPUs
			return p, nil
		},
		GPUTopologyName: noArgs(GPUTopologyName, func(Args) (framework.Plugin, error) { return NewGPUTopology(), nil }),
		HAMiName: noArgs(HAMiName, func(a Args) (framework.Plugin, error) {
			if a.Client == nil {
				return nil, fmt.Errorf("%s needs a client", HAMiName)
			}
			return NewHAMiShared(a.Client, a.Informers, a.Logger), nil
		}),
		DynamicResourcesName: func(a Args) (framework.Plugin, error) {
			if a.Client == nil {
				return nil, fmt.Errorf("%s needs a client", DynamicResourcesName)
			}
			args, err := argsAs[*v1.DynamicResourcesArgs](DynamicResourcesName, a.PluginArgs)
			if err != nil {
				return nil, err
			}
			pl := NewDynamicResourcesShared(a.Client, a.Informers, a.Logger)
			pl.gpus = a.ClaimedGPUs
			pl.filterTimeout = config.DefaultDRAFilterTimeout
			if args != nil && args.FilterTimeout != nil {
				pl.filterTimeout = args.FilterTimeout.Duration
			}
			return pl, nil
		},
		VolumeBindingName: func(a Args) (framework.Plugin, error) {
			if a.Client == nil {
				return nil, fmt.Errorf("%s needs a client", VolumeBindingName)
			}
			args, err := argsAs[*v1.VolumeBindingArgs](VolumeBindingName, a.PluginArgs)
			if err != nil {
				return nil, err
			}
			pl := NewVolumeBinding(a.Client, a.Informers, a.Logger)
			if args != nil && args.BindTimeoutSeconds != nil {
				pl.BindTimeout = time.Duration(*args.BindTimeoutSeconds) * time.Second
			}
			return pl, nil
		},
		CoschedulingName: func(a Args) (framework.Plugin, error) {
			args, err := argsAs[*config.CoschedulingArgs](CoschedulingName, a.PluginArgs)
			if err != nil {
				return nil, err
			}
			c, err := NewCoscheduling(a.PodGroups, a.WaitingPods, a.Activate)
			if err != nil {
				return nil, err
			}
			if args != nil {
				c.timeout = args.PermitWaitingTime()
			}
			return c, nil
		},
		DefaultBinderName: noArgs(DefaultBinderName, func(a Args) (framework.Plugin, error) {
			if a.Client == nil {
				return nil, fmt.Errorf("%s needs a client", DefaultBinderName)
			}
			return &DefaultBinder{Client: a.Client}, nil
		}),
	}
}

// noArgs refuses args for a plugin that takes none: a pluginConfig
// entry for it would otherwise be silently ignored.
func noArgs(name string, f Factory) Factory {
	return func(a Args) (framework.Plugin, error) {
		if a.PluginArgs != nil {
			return nil, fmt.Errorf("plugin %s takes no args", name)
		}
		return f(a)
	}
}

// argsAs returns a plugin's args as the type it takes (nil when none
// were given).
func argsAs[T runtime.Object](name string, args runtime.Object) (T, error) {
	var zero T
	if args == nil {
		return zero, nil
	}
	t, ok := args.(T)
	if !ok {
		return zero, fmt.Errorf("plugin %s: args of kind %q, want %T", name, args.GetObjectKind().GroupVersionKind().Kind, zero)
	}
	return t, nil
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

// informersOf returns f when it reads through c, else a factory of its own
// on c (own: the plugin runs it and waits for it).
func informersOf(c client.Interface, f *client.InformerFactory, log *slog.Logger) (_ *client.InformerFactory, own bool) {
	if f != nil && f.Client() == c {
		return f, false
	}
	return client.NewInformerFactory(c, log), true
}
