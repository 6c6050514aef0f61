package scheduler

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"sigs.k8s.io/yaml"

	"skiff.dev/skiff/controlplane/scheduler/plugins"
)

// Config chooses the scheduler's plugins, their weights and its tuning.
// It is read from a YAML file (LoadConfig); fields left out keep their
// DefaultConfig values.
//
//	plugins:                 # the plugins that run, in order
//	- name: NodeResourcesFit
//	  weight: 1              # score weight (score plugins only; default 1)
//	- name: DefaultBinder
//	scoringStrategy:
//	  type: MostAllocated    # or LeastAllocated
//	  resources:
//	  - {name: nvidia.com/gpu, weight: 5}
//	  - {name: cpu, weight: 1}
type Config struct {
	// APIVersion and Kind are optional; when given they must be
	// skiff.dev/v1alpha1 and SchedulerConfiguration.
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	// Plugins that run, in order. Each runs at every extension point it
	// implements (a filter-and-score plugin filters and scores). A plugin
	// not listed is off.
	Plugins []PluginConfig `json:"plugins,omitempty"`
	// ScoringStrategy of NodeResourcesFit.
	ScoringStrategy plugins.ScoringStrategy `json:"scoringStrategy,omitempty"`
	// PercentageOfNodesToScore: stop filtering once this share of the nodes
	// is found feasible (at least 100 nodes, or all when fewer). 0 means
	// adaptive, as Kubernetes: 50% minus 1% per 125 nodes, at least 5%.
	PercentageOfNodesToScore int32 `json:"percentageOfNodesToScore,omitempty"`
	// Parallelism bounds the goroutines that filter and score nodes.
	Parallelism int `json:"parallelism,omitempty"`
	// PodInitialBackoff and PodMaxBackoff bound the wait before a failed pod
	// is retried: PodInitialBackoff after its first attempt, doubled for
	// each further one, at most PodMaxBackoff (client/backoff).
	PodInitialBackoff Duration `json:"podInitialBackoff,omitempty"`
	PodMaxBackoff     Duration `json:"podMaxBackoff,omitempty"`
	// MaxUnschedulable is how long a pod waits in unschedulableQ, with no
	// cluster event, before it is tried again anyway.
	MaxUnschedulable Duration `json:"podMaxInUnschedulablePodsDuration,omitempty"`
	// AssumedPodTTL: an assumed pod whose binding returned but that the
	// informer never showed bound is dropped after this long.
	AssumedPodTTL Duration `json:"assumedPodTTL,omitempty"`
	// DisablePreemption turns preemption off: a pod that fits nowhere
	// waits, whatever its priority.
	DisablePreemption bool `json:"disablePreemption,omitempty"`
}

// PluginConfig enables one plugin.
type PluginConfig struct {
	Name string `json:"name"`
	// Weight multiplies the plugin's 0..100 score (score plugins only).
	// 0 means 1.
	Weight int64 `json:"weight,omitempty"`
}

// Duration is a time.Duration written as "10s" in YAML.
type Duration struct{ time.Duration }

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: expected a string such as \"10s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// Config's apiVersion and kind.
const (
	ConfigAPIVersion = "skiff.dev/v1alpha1"
	ConfigKind       = "SchedulerConfiguration"
)

// DefaultConfig is Kubernetes' default profile, minus what skiff lacks
// (volumes, inter-pod affinity, topology spread), plus NodeReady and the
// GPU topology hook.
func DefaultConfig() Config {
	return Config{
		// Cheap filters first: a filter stops at the first rejection, so
		// order only changes speed and which reason a node reports.
		Plugins: []PluginConfig{
			{Name: plugins.NodeUnschedulableName},
			{Name: plugins.NodeNameName},
			// Weight 3 as Kubernetes: avoiding PreferNoSchedule taints
			// matters more than balancing resources.
			{Name: plugins.TaintTolerationName, Weight: 3},
			{Name: plugins.NodeReadyName},
			// Weight 2 as Kubernetes: preferred affinity is the user's wish.
			{Name: plugins.NodeAffinityName, Weight: 2},
			{Name: plugins.NodePortsName},
			// PodGroups all or nothing (PreFilter, Permit); pods without the
			// scheduling.x-k8s.io/pod-group label pass it untouched.
			{Name: plugins.CoschedulingName},
			{Name: plugins.NodeResourcesFitName, Weight: 1},
			// ResourceClaims (DRA): after the cheap filters, since the
			// allocator is the costliest filter; pods without claims skip it.
			{Name: plugins.DynamicResourcesName},
			// Weight 2: for a multi-GPU pod, NVLink-connected GPUs matter
			// more than balance. With no topology provider it scores every
			// node the same and changes nothing.
			{Name: plugins.GPUTopologyName, Weight: 2},
			{Name: plugins.DefaultBinderName},
		},
		// Spread by cpu and memory, as Kubernetes. GPU clusters often
		// prefer MostAllocated on nvidia.com/gpu, to keep whole nodes free
		// for 8-GPU jobs: see testdata/valid-binpack-gpu.yaml.
		ScoringStrategy: plugins.DefaultScoringStrategy(),
		// Adaptive, as Kubernetes: all nodes up to 100, then a shrinking share.
		PercentageOfNodesToScore: 0,
		// Kubernetes' default; the real bound is the CPU count.
		Parallelism: 16,
		// Kubernetes' defaults: quick first retry, no pod waits more than 10s.
		PodInitialBackoff: Duration{time.Second},
		PodMaxBackoff:     Duration{10 * time.Second},
		// Kubernetes waits 5 minutes. skiff moves pods on every relevant
		// event, so this net only catches what no event reports; 60s keeps
		// a classroom from waiting long if one is missed.
		MaxUnschedulable: Duration{60 * time.Second},
		// Kubernetes once used 30s. A binding the informer never confirms
		// would otherwise hold the node's resources forever.
		AssumedPodTTL: Duration{30 * time.Second},
	}
}

// LoadConfig reads a YAML file over DefaultConfig (unknown fields are
// errors) and validates it.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read scheduler config: %w", err)
	}
	return ParseConfig(data)
}

// ParseConfig is LoadConfig for bytes.
func ParseConfig(data []byte) (Config, error) {
	cfg := DefaultConfig()
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return Config{}, fmt.Errorf("parse scheduler config: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Validate reports every problem of the configuration at once.
func (c Config) Validate() error {
	var errs []error
	if c.APIVersion != "" && c.APIVersion != ConfigAPIVersion {
		errs = append(errs, fmt.Errorf("apiVersion: %q is not supported (%s)", c.APIVersion, ConfigAPIVersion))
	}
	if c.Kind != "" && c.Kind != ConfigKind {
		errs = append(errs, fmt.Errorf("kind: %q is not supported (%s)", c.Kind, ConfigKind))
	}
	registry := plugins.Registry()
	seen := map[string]bool{}
	binder := false
	for i, p := range c.Plugins {
		if _, ok := registry[p.Name]; !ok {
			errs = append(errs, fmt.Errorf("plugins[%d].name: unknown plugin %q (known: %v)", i, p.Name, plugins.Names()))
		}
		if seen[p.Name] {
			errs = append(errs, fmt.Errorf("plugins[%d].name: %q given twice", i, p.Name))
		}
		seen[p.Name] = true
		if p.Name == plugins.DefaultBinderName {
			binder = true
		}
		if p.Weight < 0 || p.Weight > 100 {
			errs = append(errs, fmt.Errorf("plugins[%d].weight: %d is not in 0..100", i, p.Weight))
		}
	}
	if !binder {
		errs = append(errs, fmt.Errorf("plugins: %s is required (without it no pod is ever bound)", plugins.DefaultBinderName))
	}
	errs = append(errs, c.ScoringStrategy.Validate()...)
	if c.PercentageOfNodesToScore < 0 || c.PercentageOfNodesToScore > 100 {
		errs = append(errs, fmt.Errorf("percentageOfNodesToScore: %d is not in 0..100", c.PercentageOfNodesToScore))
	}
	if c.Parallelism < 1 {
		errs = append(errs, fmt.Errorf("parallelism: %d must be at least 1", c.Parallelism))
	}
	if c.PodInitialBackoff.Duration <= 0 {
		errs = append(errs, fmt.Errorf("podInitialBackoff: %s must be positive", c.PodInitialBackoff))
	}
	if c.PodMaxBackoff.Duration < c.PodInitialBackoff.Duration {
		errs = append(errs, fmt.Errorf("podMaxBackoff: %s is less than podInitialBackoff %s", c.PodMaxBackoff, c.PodInitialBackoff))
	}
	if c.MaxUnschedulable.Duration <= 0 {
		errs = append(errs, fmt.Errorf("podMaxInUnschedulablePodsDuration: %s must be positive", c.MaxUnschedulable))
	}
	if c.AssumedPodTTL.Duration <= 0 {
		errs = append(errs, fmt.Errorf("assumedPodTTL: %s must be positive", c.AssumedPodTTL))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid scheduler config: %w", errors.Join(errs...))
	}
	return nil
}
