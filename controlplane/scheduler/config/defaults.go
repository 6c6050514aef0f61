package config

import (
	"reflect"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	v1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"
)

// Defaults, as Kubernetes' (pkg/scheduler/apis/config/v1/defaults.go).
const (
	DefaultParallelism              = 16
	DefaultPodInitialBackoffSeconds = 1
	DefaultPodMaxBackoffSeconds     = 10
	// DefaultPercentageOfNodesToScore 0 is adaptive.
	DefaultPercentageOfNodesToScore = 0
	// DefaultPermitWaitingTimeSeconds is Coscheduling's wait (scheduler-plugins').
	DefaultPermitWaitingTimeSeconds = 60
	// DefaultHardPodAffinityWeight is InterPodAffinityArgs' default.
	DefaultHardPodAffinityWeight = 1
	// DefaultMinCandidateNodesPercentage and DefaultMinCandidateNodesAbsolute
	// are DefaultPreemptionArgs' defaults.
	DefaultMinCandidateNodesPercentage = 10
	DefaultMinCandidateNodesAbsolute   = 100
	// DefaultDRAFilterTimeout is DynamicResourcesArgs.filterTimeout's default.
	DefaultDRAFilterTimeout = v1.DynamicResourcesFilterTimeoutDefault
)

// DefaultPlugins are the plugins every profile starts from: Kubernetes'
// default plugins (getDefaultPlugins) that skiff has, in Kubernetes'
// order and with its weights, and skiff's own where they fit:
//
//	NodeReady      after the cheap node filters (Kubernetes uses a taint)
//	Coscheduling   before NodeResourcesFit: a gang's PreFilter rejects early
//	GPUTopology    a score (weight 2: for a multi-GPU pod NVLink matters
//	               more than balance; with no topology it scores all nodes
//	               the same and changes nothing)
//	HAMi           HAMi's vGPU slices on nodes that registered for HAMi
//	               (a filter, and a score of weight 3: HAMi's node policy)
//
// Kubernetes' other volume plugins (VolumeRestrictions, NodeVolumeLimits,
// VolumeZone), ImageLocality and SchedulingGates are not in skiff:
// disabling them is allowed (a no-op), enabling them fails with
// Kubernetes' "does not exist". A filter stops at the first rejection,
// so the order changes speed and which reason a node reports, never the
// outcome.
func DefaultPlugins() *v1.Plugins {
	w := func(n int32) *int32 { return &n }
	return &v1.Plugins{MultiPoint: v1.PluginSet{Enabled: []v1.Plugin{
		{Name: "PrioritySort"},
		{Name: "NodeUnschedulable"},
		{Name: "NodeName"},
		// Weight 3 as Kubernetes: avoiding PreferNoSchedule taints matters
		// more than balancing resources.
		{Name: "TaintToleration", Weight: w(3)},
		{Name: "NodeReady"},
		// Weight 2 as Kubernetes: preferred affinity is the user's wish.
		{Name: "NodeAffinity", Weight: w(2)},
		{Name: "NodePorts"},
		// PersistentVolumeClaims: a bound volume's node, a free volume
		// or provisioning for a claim waiting for its first consumer.
		{Name: "VolumeBinding"},
		{Name: "Coscheduling"},
		{Name: "NodeResourcesFit", Weight: w(1)},
		{Name: "PodTopologySpread", Weight: w(2)},
		{Name: "InterPodAffinity", Weight: w(2)},
		// Before DefaultPreemption, as Kubernetes: ResourceClaims are the
		// costliest filter; pods without claims skip it.
		{Name: "DynamicResources"},
		{Name: "DefaultPreemption"},
		{Name: "NodeResourcesBalancedAllocation", Weight: w(1)},
		{Name: "GPUTopology", Weight: w(2)},
		// HAMi's policies (binpack or spread) decide among HAMi nodes in
		// HAMi; here they weigh most of the scores.
		{Name: "HAMi", Weight: w(3)},
		{Name: "DefaultBinder"},
	}}}
}

// setDefaults fills what the configuration left out, as Kubernetes'
// SetDefaults_KubeSchedulerConfiguration.
func setDefaults(c *v1.KubeSchedulerConfiguration) {
	if c.Parallelism == nil {
		c.Parallelism = ptr.To[int32](DefaultParallelism)
	}
	if len(c.Profiles) == 0 {
		c.Profiles = append(c.Profiles, v1.KubeSchedulerProfile{})
	}
	// Only a single profile gets a default name; validation requires a
	// name of every profile of several.
	if len(c.Profiles) == 1 && c.Profiles[0].SchedulerName == nil {
		c.Profiles[0].SchedulerName = ptr.To(DefaultSchedulerName)
	}
	for i := range c.Profiles {
		setProfileDefaults(&c.Profiles[i])
	}
	if c.PercentageOfNodesToScore == nil {
		c.PercentageOfNodesToScore = ptr.To[int32](DefaultPercentageOfNodesToScore)
	}
	if c.PodInitialBackoffSeconds == nil {
		c.PodInitialBackoffSeconds = ptr.To[int64](DefaultPodInitialBackoffSeconds)
	}
	if c.PodMaxBackoffSeconds == nil {
		c.PodMaxBackoffSeconds = ptr.To[int64](DefaultPodMaxBackoffSeconds)
	}
	for i := range c.Extenders {
		if c.Extenders[i].HTTPTimeout.Duration == 0 {
			c.Extenders[i].HTTPTimeout = metav1.Duration{Duration: DefaultExtenderHTTPTimeout}
		}
	}
}

// DefaultExtenderHTTPTimeout is an extender's httpTimeout when it gives
// none (Kubernetes' DefaultExtenderTimeout).
const DefaultExtenderHTTPTimeout = 5e9 // 5s

func setProfileDefaults(p *v1.KubeSchedulerProfile) {
	if p.SchedulerName == nil {
		p.SchedulerName = ptr.To("")
	}
	p.Plugins = mergePlugins(DefaultPlugins(), p.Plugins)
	given := map[string]bool{}
	for i := range p.PluginConfig {
		pc := &p.PluginConfig[i]
		given[pc.Name] = true
		k, ok := argKinds[pc.Name]
		if !ok {
			continue
		}
		if pc.Args.Object == nil && len(pc.Args.Raw) == 0 { // a name with no args: all defaults
			pc.Args.Object = k.new()
			pc.Args.Object.GetObjectKind().SetGroupVersionKind(v1.SchemeGroupVersion.WithKind(pc.Name + "Args"))
		}
		if pc.Args.Object != nil && reflect.TypeOf(pc.Args.Object) == reflect.TypeOf(k.new()) {
			k.defaults(pc.Args.Object)
		}
	}
	// Args for every enabled plugin that takes some and was given none.
	for _, name := range enabledNames(p.Plugins) {
		k, ok := argKinds[name]
		if !ok || given[name] {
			continue
		}
		args := k.new()
		k.defaults(args)
		args.GetObjectKind().SetGroupVersionKind(v1.SchemeGroupVersion.WithKind(name + "Args"))
		p.PluginConfig = append(p.PluginConfig, v1.PluginConfig{Name: name, Args: runtime.RawExtension{Object: args}})
	}
}

// enabledNames lists every plugin enabled at some extension point, sorted.
func enabledNames(p *v1.Plugins) []string {
	var names []string
	for _, ps := range pluginSets(p) {
		for _, pl := range ps.set.Enabled {
			if !slices.Contains(names, pl.Name) {
				names = append(names, pl.Name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// ExtensionPoint names one of a profile's plugin sets, as in the file.
type ExtensionPoint struct {
	Name string
	set  *v1.PluginSet
}

// Set is the extension point's plugin set.
func (e ExtensionPoint) Set() *v1.PluginSet { return e.set }

// pluginSets lists the plugin sets of p: MultiPoint, then the extension
// points in the order a pod meets them.
func pluginSets(p *v1.Plugins) []ExtensionPoint {
	return []ExtensionPoint{
		{"multiPoint", &p.MultiPoint},
		{"preEnqueue", &p.PreEnqueue},
		{"queueSort", &p.QueueSort},
		{"preFilter", &p.PreFilter},
		{"filter", &p.Filter},
		{"postFilter", &p.PostFilter},
		{"preScore", &p.PreScore},
		{"score", &p.Score},
		{"reserve", &p.Reserve},
		{"permit", &p.Permit},
		{"preBind", &p.PreBind},
		{"bind", &p.Bind},
		{"postBind", &p.PostBind},
		{"placementGenerate", &p.PlacementGenerate},
		{"placementScore", &p.PlacementScore},
	}
}

// ExtensionPoints lists p's plugin sets, MultiPoint first (for the
// scheduler's framework builder).
func ExtensionPoints(p *v1.Plugins) []ExtensionPoint { return pluginSets(p) }

// mergePlugins merges a profile's plugins into the defaults, as
// Kubernetes' mergePlugins: per extension point, a default plugin the
// profile disables (by name or '*') goes; one it enables again is
// replaced in place (keeping its position, taking the profile's weight);
// the profile's other enabled plugins follow, in its order. The profile's
// disabled lists are kept: they also stop MultiPoint plugins from
// expanding into that extension point.
func mergePlugins(def, custom *v1.Plugins) *v1.Plugins {
	if custom == nil {
		return def
	}
	ds, cs := pluginSets(def), pluginSets(custom)
	for i := range ds {
		*ds[i].set = mergePluginSet(*ds[i].set, *cs[i].set)
	}
	return def
}

func mergePluginSet(def, custom v1.PluginSet) v1.PluginSet {
	disabled := map[string]bool{}
	var out v1.PluginSet
	for _, p := range custom.Disabled {
		out.Disabled = append(out.Disabled, v1.Plugin{Name: p.Name})
		disabled[p.Name] = true
	}
	for _, p := range def.Disabled {
		out.Disabled = append(out.Disabled, v1.Plugin{Name: p.Name})
		disabled[p.Name] = true
	}
	customIndex := map[string]int{}
	for i, p := range custom.Enabled {
		customIndex[p.Name] = i
	}
	replaced := map[int]bool{}
	if !disabled["*"] {
		for _, p := range def.Enabled {
			if disabled[p.Name] {
				continue
			}
			if i, ok := customIndex[p.Name]; ok {
				p = custom.Enabled[i]
				replaced[i] = true
			}
			out.Enabled = append(out.Enabled, p)
		}
	}
	// A name given twice stays twice: building the profile reports it.
	for i, p := range custom.Enabled {
		if !replaced[i] {
			out.Enabled = append(out.Enabled, p)
		}
	}
	return out
}
