package config

import (
	"errors"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	v1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"
)

// Config is a KubeSchedulerConfiguration read, defaulted and validated:
// what the scheduler runs.
type Config struct {
	// Parallelism bounds the goroutines that filter and score nodes
	// (parallelism; default 16).
	Parallelism int
	// PercentageOfNodesToScore: stop filtering once this share of the
	// nodes is found feasible (at least 100 nodes). 0 means adaptive, as
	// Kubernetes: 50% minus 1% per 125 nodes, at least 5%. A profile may
	// set its own.
	PercentageOfNodesToScore int32
	// PodInitialBackoff and PodMaxBackoff bound the wait before a failed
	// pod is retried: PodInitialBackoff after its first attempt, doubled
	// for each further one, at most PodMaxBackoff
	// (podInitialBackoffSeconds 1, podMaxBackoffSeconds 10).
	PodInitialBackoff, PodMaxBackoff time.Duration
	// Kubeconfig is clientConnection.kubeconfig: when set, the scheduler
	// talks to the API server through it rather than in process.
	Kubeconfig string
	// Profiles, at least one, with distinct scheduler names.
	Profiles []Profile
	// Extenders: HTTP(S) services asked at filter, prioritize, preempt
	// and bind (extenders).
	Extenders []v1.Extender
}

// Profile is one scheduler name with its plugins and their arguments.
type Profile struct {
	// SchedulerName: the spec.schedulerName of the pods this profile
	// schedules.
	SchedulerName string
	// PercentageOfNodesToScore overrides the configuration's for this
	// profile; nil: the configuration's.
	PercentageOfNodesToScore *int32
	// Plugins per extension point, merged into DefaultPlugins. MultiPoint
	// lists plugins that run at every extension point they implement,
	// except where the extension point's Disabled names them (or '*').
	Plugins v1.Plugins
	// PluginConfig holds the arguments of every enabled plugin that
	// takes any, defaulted (and the ones given for other plugins).
	PluginConfig []PluginConfig
}

// PluginConfig is one plugin's arguments.
type PluginConfig struct {
	Name string
	// Args is the typed, defaulted arguments (*v1.NodeResourcesFitArgs,
	// *CoschedulingArgs, ...), or *runtime.Unknown for args of a kind
	// this package does not know (an out-of-tree plugin's; the plugin's
	// factory decides).
	Args runtime.Object
}

// Args returns the arguments configured for plugin name, nil if none.
func (p *Profile) Args(name string) runtime.Object {
	for _, pc := range p.PluginConfig {
		if pc.Name == name {
			return pc.Args
		}
	}
	return nil
}

// Profile returns the profile of schedulerName, nil if none.
func (c *Config) Profile(schedulerName string) *Profile {
	for i := range c.Profiles {
		if c.Profiles[i].SchedulerName == schedulerName {
			return &c.Profiles[i]
		}
	}
	return nil
}

// The configuration's apiVersion and kind.
const (
	APIVersion = "kubescheduler.config.k8s.io/v1"
	Kind       = "KubeSchedulerConfiguration"
)

// DefaultSchedulerName is the scheduler name of the only profile of a
// configuration that gives none, and the one pods get by default.
const DefaultSchedulerName = "default-scheduler"

// The configuration skiff read before it read Kubernetes': refused with
// a pointer to the new format.
const (
	oldAPIVersion = "skiff.dev/v1alpha1"
	oldKind       = "SchedulerConfiguration"
)

// ErrOldFormat is returned for a skiff.dev/v1alpha1 SchedulerConfiguration.
var ErrOldFormat = errors.New("skiff.dev/v1alpha1 SchedulerConfiguration is no longer read: write a " +
	APIVersion + " " + Kind + " instead, as for kube-scheduler --config: " +
	"NodeResourcesFit's scoringStrategy goes under profiles[].pluginConfig[].args " +
	"(examples/homework/task3/scheduler-binpack.yaml, docs/labs.md)")

// Default returns the configuration used when no file is given: one
// profile, default-scheduler, with the default plugins.
func Default() *Config {
	c, err := fromVersioned(&v1.KubeSchedulerConfiguration{})
	if err != nil {
		panic(fmt.Sprintf("scheduler config: the defaults do not validate: %v", err)) // a bug in this package
	}
	return c
}

// Load reads and parses a configuration file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read scheduler config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("scheduler config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes, defaults and validates a KubeSchedulerConfiguration
// (see the package doc). Errors name the field.
func Parse(data []byte) (*Config, error) {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(data, &tm); err == nil && (tm.APIVersion == oldAPIVersion || tm.Kind == oldKind) {
		return nil, ErrOldFormat
	}
	vc, err := decode(data)
	if err != nil {
		if tm.APIVersion != APIVersion || tm.Kind != Kind {
			return nil, fmt.Errorf("%w (want apiVersion: %s, kind: %s)", err, APIVersion, Kind)
		}
		return nil, err
	}
	return fromVersioned(vc)
}

// fromVersioned refuses what skiff does not support, defaults, validates
// and converts a decoded configuration.
func fromVersioned(vc *v1.KubeSchedulerConfiguration) (*Config, error) {
	if errs := unsupported(vc); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	setDefaults(vc)
	if errs := validate(vc); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	c := &Config{
		Parallelism:              int(*vc.Parallelism),
		PercentageOfNodesToScore: *vc.PercentageOfNodesToScore,
		PodInitialBackoff:        time.Duration(*vc.PodInitialBackoffSeconds) * time.Second,
		PodMaxBackoff:            time.Duration(*vc.PodMaxBackoffSeconds) * time.Second,
		Kubeconfig:               vc.ClientConnection.Kubeconfig,
		Extenders:                vc.Extenders,
	}
	for _, vp := range vc.Profiles {
		p := Profile{SchedulerName: *vp.SchedulerName, PercentageOfNodesToScore: vp.PercentageOfNodesToScore, Plugins: *vp.Plugins}
		for _, pc := range vp.PluginConfig {
			args := pc.Args.Object
			if args == nil && len(pc.Args.Raw) > 0 {
				args = &runtime.Unknown{Raw: pc.Args.Raw, ContentType: runtime.ContentTypeJSON}
			}
			p.PluginConfig = append(p.PluginConfig, PluginConfig{Name: pc.Name, Args: args})
		}
		c.Profiles = append(c.Profiles, p)
	}
	return c, nil
}
