package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	v1 "k8s.io/kube-scheduler/config/v1"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/config"
	"skiff.dev/skiff/controlplane/scheduler/framework"
	"skiff.dev/skiff/controlplane/scheduler/plugins"
)

// A profile is one KubeSchedulerConfiguration profile at work: the
// framework built from its plugins, for the pods whose spec.schedulerName
// names it. A pod naming no profile is not this scheduler's: it stays
// Pending, with no event, as in Kubernetes (another scheduler may serve
// that name).
type profile struct {
	fwk *framework.Framework
	// percentage: the profile's percentageOfNodesToScore, else the
	// configuration's (0: adaptive).
	percentage int32
	// extensions: fwk.HasPreFilterExtensions(), computed once.
	extensions bool
	// hints: the queueing hints of the profile's plugins.
	hints framework.Hints
}

// profileName is the profile a pod asks for ("" is default-scheduler,
// which the API server writes for it anyway).
func profileName(pod *api.Pod) string {
	if pod.Spec.SchedulerName == "" {
		return config.DefaultSchedulerName
	}
	return pod.Spec.SchedulerName
}

// extensionOrder is the order Kubernetes' NewFramework walks extension
// points; it decides which interface a "does not exist" error names for
// a multiPoint plugin.
var extensionOrder = []string{
	framework.PointPreFilter, framework.PointFilter, framework.PointPostFilter, framework.PointReserve,
	framework.PointPreScore, framework.PointScore, framework.PointPreBind, framework.PointBind,
	framework.PointPostBind, framework.PointPermit, framework.PointPreEnqueue, framework.PointQueueSort,
}

func interfaceName(point string) string {
	for _, p := range framework.Points {
		if p.Name == point {
			return p.Interface
		}
	}
	return point
}

// pluginSet returns the profile's plugin set of an extension point.
func pluginSet(ps *v1.Plugins, point string) v1.PluginSet {
	for _, ep := range config.ExtensionPoints(ps) {
		if ep.Name == point {
			return *ep.Set()
		}
	}
	return v1.PluginSet{}
}

// profileBuilder makes the plugins of every profile. A plugin configured
// alike in several profiles is made once and shared: what it keeps (DRA's
// allocations in flight, the GPUs claims hold) belongs to the scheduler,
// not to one profile.
type profileBuilder struct {
	registry  map[string]plugins.Factory
	args      plugins.Args
	instances map[string]framework.Plugin // by name and args
	sources   []framework.EventSourcePlugin
}

// instance returns the plugin name configured with args, made once.
func (b *profileBuilder) instance(name string, p *config.Profile) (framework.Plugin, bool, error) {
	factory, ok := b.registry[name]
	if !ok {
		return nil, false, nil
	}
	a := b.args
	a.PluginArgs = p.Args(name)
	key := name
	if a.PluginArgs != nil {
		j, err := json.Marshal(a.PluginArgs)
		if err != nil {
			return nil, false, fmt.Errorf("plugin %s: args: %w", name, err)
		}
		key += "|" + string(j)
	}
	if pl, ok := b.instances[key]; ok {
		return pl, true, nil
	}
	pl, err := factory(a)
	if err != nil {
		return nil, false, fmt.Errorf("initializing plugin %q: %w", name, err)
	}
	if pl.Name() != name {
		return nil, false, fmt.Errorf("initializing plugin %q: it calls itself %q", name, pl.Name())
	}
	b.instances[key] = pl
	if es, ok := pl.(framework.EventSourcePlugin); ok {
		b.sources = append(b.sources, es)
	}
	return pl, true, nil
}

// build makes one profile's framework, as Kubernetes' NewFramework: the
// plugins each extension point enables explicitly, in their order, and
// the multiPoint plugins expanded into every extension point they
// implement and that does not disable them (by name or '*'). An
// extension point that names a multiPoint plugin itself overrides it:
// those go first, then the multiPoint ones, then its other plugins.
func (b *profileBuilder) build(p *config.Profile, waiting *framework.WaitingPods) (*framework.Framework, error) {
	f := &framework.Framework{ProfileName: p.SchedulerName, Waiting: waiting}
	made := map[string]framework.Plugin{}
	for _, ep := range config.ExtensionPoints(&p.Plugins) {
		for _, pl := range ep.Set().Enabled {
			if _, done := made[pl.Name]; done {
				continue
			}
			inst, ok, err := b.instance(pl.Name, p)
			if err != nil {
				return nil, err
			}
			if ok {
				made[pl.Name] = inst
			}
		}
	}
	weights := map[string]int64{}
	for _, pl := range pluginSet(&p.Plugins, framework.PointScore).Enabled {
		if pl.Weight != nil {
			weights[pl.Name] = int64(*pl.Weight)
		}
	}
	for _, pl := range p.Plugins.MultiPoint.Enabled {
		if _, set := weights[pl.Name]; !set && pl.Weight != nil {
			weights[pl.Name] = int64(*pl.Weight)
		}
	}
	multi := p.Plugins.MultiPoint.Enabled
	for _, point := range extensionOrder {
		set := pluginSet(&p.Plugins, point)
		var explicit []string
		for _, pl := range set.Enabled {
			inst, ok := made[pl.Name]
			if !ok {
				return nil, fmt.Errorf("%s %q does not exist", interfaceName(point), pl.Name)
			}
			if !framework.Implements(inst, point) {
				return nil, fmt.Errorf("plugin %q does not extend %s plugin", pl.Name, interfaceName(point))
			}
			if slices.Contains(explicit, pl.Name) {
				return nil, fmt.Errorf("plugin %q already registered as %q", pl.Name, interfaceName(point))
			}
			explicit = append(explicit, pl.Name)
		}
		disabled := map[string]bool{}
		for _, pl := range set.Disabled {
			disabled[pl.Name] = true
		}
		var overrides, fromMulti []string
		if !disabled["*"] {
			for _, pl := range multi {
				inst, ok := made[pl.Name]
				if !ok {
					return nil, fmt.Errorf("%s %q does not exist", interfaceName(point), pl.Name)
				}
				if !framework.Implements(inst, point) || disabled[pl.Name] {
					continue
				}
				if slices.Contains(explicit, pl.Name) {
					overrides = append(overrides, pl.Name)
					continue
				}
				if slices.Contains(fromMulti, pl.Name) {
					return nil, fmt.Errorf("plugin %q already registered as %q", pl.Name, interfaceName(point))
				}
				fromMulti = append(fromMulti, pl.Name)
			}
		}
		var order []string
		for _, n := range explicit {
			if slices.Contains(overrides, n) {
				order = append(order, n)
			}
		}
		order = append(order, fromMulti...)
		for _, n := range explicit {
			if !slices.Contains(overrides, n) {
				order = append(order, n)
			}
		}
		for _, n := range order {
			f.Append(point, made[n], weights[n])
		}
	}
	if len(f.QueueSort) != 1 {
		return nil, fmt.Errorf("only one queue sort plugin required for profile with scheduler name %q, but got %d", p.SchedulerName, len(f.QueueSort))
	}
	if len(f.Bind) == 0 {
		return nil, fmt.Errorf("at least one bind plugin is needed for profile with scheduler name %q", p.SchedulerName)
	}
	return f, nil
}

// profilePlugins lists every plugin of a framework once.
func (b *profileBuilder) profilePlugins(f *framework.Framework) []framework.Plugin {
	var out []framework.Plugin
	add := func(p framework.Plugin) {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for _, p := range f.PreEnqueue {
		add(p)
	}
	for _, p := range f.PreFilter {
		add(p)
	}
	for _, p := range f.Filter {
		add(p)
	}
	for _, p := range f.Reserve {
		add(p)
	}
	for _, p := range f.Permit {
		add(p)
	}
	return out
}

// buildProfiles makes every profile of cfg. All profiles must share their
// queue sort plugin: the scheduler has one queue.
func buildProfiles(cfg *config.Config, registry map[string]plugins.Factory, args plugins.Args) (map[string]*profile, []framework.EventSourcePlugin, error) {
	b := &profileBuilder{registry: registry, args: args, instances: map[string]framework.Plugin{}}
	out := map[string]*profile{}
	var sort framework.QueueSortPlugin
	for i := range cfg.Profiles {
		p := &cfg.Profiles[i]
		f, err := b.build(p, args.WaitingPods)
		if err != nil {
			return nil, nil, fmt.Errorf("creating profile for scheduler name %s: %w", p.SchedulerName, err)
		}
		if sort == nil {
			sort = f.QueueSort[0]
		} else if f.QueueSort[0] != sort {
			return nil, nil, fmt.Errorf("creating profile for scheduler name %s: queueSort must be the same for all profiles", p.SchedulerName)
		}
		pct := cfg.PercentageOfNodesToScore
		if p.PercentageOfNodesToScore != nil {
			pct = *p.PercentageOfNodesToScore
		}
		out[p.SchedulerName] = &profile{fwk: f, percentage: pct, extensions: f.HasPreFilterExtensions(), hints: framework.HintsOf(context.Background(), b.profilePlugins(f))}
	}
	return out, b.sources, nil
}
