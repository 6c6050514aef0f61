package scenario

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"skiff.dev/skiff/api"
)

// APIVersion and Kind of a scenario file (skiff's own files, like the
// cluster file of api/fabric, are skiff.dev/v1alpha1).
const (
	APIVersion = "skiff.dev/v1alpha1"
	Kind       = "Scenario"
)

// File is a scenario file.
type File struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   Metadata `json:"metadata"`
	// Description is printed before the run.
	Description string `json:"description,omitempty"`
	// Namespace of objects and pod references that name none ("" is
	// "default").
	Namespace string `json:"namespace,omitempty"`
	// Cluster gives the nodes from a cluster file (api/fabric: node count,
	// GPUs, NVLink domains); Nodes adds (or, alone, gives) node groups.
	Cluster *ClusterRef `json:"cluster,omitempty"`
	Nodes   []NodeGroup `json:"nodes,omitempty"`
	// Configs are the scheduler configurations the scenario runs under
	// when the command line names none; none: Kubernetes' defaults,
	// named "default".
	Configs []Config `json:"configs,omitempty"`
	// Steps run in order.
	Steps []Step `json:"steps"`

	dir string // the file's directory: relative paths start there
}

// Metadata names the scenario.
type Metadata struct {
	Name string `json:"name"`
}

// ClusterRef is a cluster file and how its nodes are named.
type ClusterRef struct {
	// File is a skiff.dev/v1alpha1 Cluster (api/fabric).
	File string `json:"file"`
	// NamePrefix names its nodes PREFIX-1..PREFIX-N ("" is "node").
	NamePrefix string `json:"namePrefix,omitempty"`
}

// NodeGroup is Count alike simulated nodes.
type NodeGroup struct {
	// Name of the one node (Count 0 or 1), or the prefix of
	// NAME-1..NAME-Count.
	Name  string `json:"name"`
	Count int    `json:"count,omitempty"`
	// GPUs (nvidia.com/gpu) of each, and their product label ("" is
	// NVIDIA-A100-SXM4-40GB when GPUs > 0).
	GPUs       int    `json:"gpus,omitempty"`
	GPUProduct string `json:"gpuProduct,omitempty"`
	// CPU and Memory of each ("" is 32 and 256Gi, a DGX A100's share).
	CPU    string `json:"cpu,omitempty"`
	Memory string `json:"memory,omitempty"`
	// Labels of each.
	Labels map[string]string `json:"labels,omitempty"`
}

// Config is a named scheduler configuration.
type Config struct {
	// Name selects the expectations meant for it (Expectation.Configs).
	Name string `json:"name"`
	// File is a KubeSchedulerConfiguration; "" Kubernetes' defaults.
	File string `json:"file,omitempty"`
}

// Step is one moment of the timeline: exactly one action, then the
// expectations checked once the cluster has settled.
type Step struct {
	// Name is printed; "" is the action.
	Name string `json:"name,omitempty"`
	// Apply creates or updates objects (`kubectl apply`).
	Apply *Objects `json:"apply,omitempty"`
	// Delete deletes objects (KIND/NAME references, or those of a
	// file), their dependents with them (background propagation).
	Delete *Objects `json:"delete,omitempty"`
	// FailNode makes a node crash: no heartbeat, dead to the member view;
	// its pods are evicted.
	FailNode string `json:"failNode,omitempty"`
	// Advance moves the scenario's clock ("10m"): pods whose runFor is up
	// complete.
	Advance string `json:"advance,omitempty"`
	// Expect holds after the step.
	Expect []Expectation `json:"expect,omitempty"`
}

// Objects are Kubernetes objects: from a file (relative to the
// scenario), inline, or (for delete) by reference.
type Objects struct {
	// File of manifests (one or more YAML documents).
	File string `json:"file,omitempty"`
	// Only keeps these KIND/NAME of File (e.g. job/job-b).
	Only []string `json:"only,omitempty"`
	// Inline objects.
	Objects []json.RawMessage `json:"objects,omitempty"`
	// Refs: KIND/NAME in the scenario's namespace, or
	// NAMESPACE/KIND/NAME (delete only).
	Refs []string `json:"refs,omitempty"`
	// RunFor: the pods these objects make run this long in simulated
	// time, then complete (apply only; "" runs them until deleted).
	RunFor string `json:"runFor,omitempty"`
}

// Load reads, decodes (strictly) and checks a scenario file; every
// problem is reported at once, each with its path in the file.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	f, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", path, err)
	}
	f.dir = filepath.Dir(path)
	if err := f.checkFiles(); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", path, err)
	}
	return f, nil
}

// Parse decodes and validates a scenario's bytes. Unknown fields and
// duplicate keys are errors naming their path; so is a value of the
// wrong type.
func Parse(data []byte) (*File, error) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	var f File
	strict, err := kjson.UnmarshalStrict(j, &f, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if len(strict) > 0 {
		return nil, fmt.Errorf("parse: %w", errors.Join(strict...))
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

// Validate reports every problem at once, each with its path.
func (f *File) Validate() error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	if f.APIVersion != APIVersion {
		bad("apiVersion", "%q is not supported (%s)", f.APIVersion, APIVersion)
	}
	if f.Kind != Kind {
		bad("kind", "%q is not supported (%s)", f.Kind, Kind)
	}
	if f.Namespace != "" {
		for _, m := range validation.IsDNS1123Label(f.Namespace) {
			bad("namespace", "%q: %s", f.Namespace, m)
		}
	}
	if f.Cluster == nil && len(f.Nodes) == 0 {
		bad("nodes", "a scenario needs nodes (nodes, or cluster.file)")
	}
	if c := f.Cluster; c != nil {
		if c.File == "" {
			bad("cluster.file", "required")
		}
		if c.NamePrefix != "" {
			for _, m := range validation.IsDNS1123Subdomain(c.NamePrefix) {
				bad("cluster.namePrefix", "%q: %s", c.NamePrefix, m)
			}
		}
	}
	for i, g := range f.Nodes {
		f.validateGroup(fmt.Sprintf("nodes[%d]", i), g, bad)
	}
	names := map[string]bool{}
	for i, c := range f.Configs {
		p := fmt.Sprintf("configs[%d]", i)
		if err := checkConfigName(c.Name); err != nil {
			bad(p+".name", "%v", err)
		}
		if names[c.Name] {
			bad(p+".name", "%q given twice", c.Name)
		}
		names[c.Name] = true
	}
	if len(f.Steps) == 0 {
		bad("steps", "a scenario has at least one step")
	}
	for i := range f.Steps {
		f.validateStep(fmt.Sprintf("steps[%d]", i), &f.Steps[i], bad)
	}
	return errors.Join(errs...)
}

func (f *File) validateGroup(p string, g NodeGroup, bad func(string, string, ...any)) {
	for _, m := range validation.IsDNS1123Subdomain(g.Name) {
		bad(p+".name", "%q: %s", g.Name, m)
	}
	if g.Count < 0 || g.Count > 1000 {
		bad(p+".count", "%d: want 0..1000", g.Count)
	}
	if g.GPUs < 0 || g.GPUs > 64 {
		bad(p+".gpus", "%d: want 0..64", g.GPUs)
	}
	for k, q := range map[string]string{"cpu": g.CPU, "memory": g.Memory} {
		if q == "" {
			continue
		}
		if v, err := resource.ParseQuantity(q); err != nil {
			bad(p+"."+k, "%q: %v", q, err)
		} else if v.Sign() <= 0 {
			bad(p+"."+k, "%q: must be positive", q)
		}
	}
	for k, v := range g.Labels {
		for _, m := range validation.IsQualifiedName(k) {
			bad(p+".labels", "key %q: %s", k, m)
		}
		for _, m := range validation.IsValidLabelValue(v) {
			bad(p+".labels["+k+"]", "%q: %s", v, m)
		}
	}
}

func (f *File) validateStep(p string, s *Step, bad func(string, string, ...any)) {
	actions := 0
	for _, set := range []bool{s.Apply != nil, s.Delete != nil, s.FailNode != "", s.Advance != ""} {
		if set {
			actions++
		}
	}
	if actions != 1 {
		bad(p, "a step has exactly one of apply, delete, failNode and advance (%d given)", actions)
	}
	if s.Apply != nil {
		validateObjects(p+".apply", s.Apply, false, bad)
	}
	if s.Delete != nil {
		validateObjects(p+".delete", s.Delete, true, bad)
	}
	if s.Advance != "" {
		if d, err := time.ParseDuration(s.Advance); err != nil || d <= 0 {
			bad(p+".advance", "%q: want a positive duration such as 10m", s.Advance)
		}
	}
	for i := range s.Expect {
		validateExpectation(fmt.Sprintf("%s.expect[%d]", p, i), &s.Expect[i], bad)
	}
}

func validateObjects(p string, o *Objects, del bool, bad func(string, string, ...any)) {
	sources := 0
	for _, set := range []bool{o.File != "", len(o.Objects) > 0, len(o.Refs) > 0} {
		if set {
			sources++
		}
	}
	if sources != 1 {
		bad(p, "give exactly one of file, objects and refs")
	}
	if len(o.Refs) > 0 && !del {
		bad(p+".refs", "only delete takes references (apply takes file or objects)")
	}
	if len(o.Only) > 0 && o.File == "" {
		bad(p+".only", "only selects from a file")
	}
	for i, r := range o.Only {
		if _, err := parseRef(r, false, ""); err != nil {
			bad(fmt.Sprintf("%s.only[%d]", p, i), "%v", err)
		}
	}
	for i, r := range o.Refs {
		if _, err := parseRef(r, true, "default"); err != nil {
			bad(fmt.Sprintf("%s.refs[%d]", p, i), "%v", err)
		}
	}
	for i, raw := range o.Objects {
		for _, d := range api.DecodeStream(raw) {
			if d.Err != nil {
				bad(fmt.Sprintf("%s.objects[%d]", p, i), "%v", d.Err)
			}
		}
	}
	if o.RunFor != "" {
		if del {
			bad(p+".runFor", "only apply takes runFor")
		} else if d, err := time.ParseDuration(o.RunFor); err != nil || d <= 0 {
			bad(p+".runFor", "%q: want a positive duration such as 30m", o.RunFor)
		}
	}
}

// checkFiles reads every file the scenario names, so a missing one is
// found before anything runs.
func (f *File) checkFiles() error {
	var errs []error
	check := func(p, name string) {
		if name == "" {
			return
		}
		if _, err := os.Stat(f.path(name)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
		}
	}
	if f.Cluster != nil {
		check("cluster.file", f.Cluster.File)
	}
	for i, c := range f.Configs {
		check(fmt.Sprintf("configs[%d].file", i), c.File)
	}
	for i, s := range f.Steps {
		if s.Apply != nil {
			check(fmt.Sprintf("steps[%d].apply.file", i), s.Apply.File)
		}
		if s.Delete != nil {
			check(fmt.Sprintf("steps[%d].delete.file", i), s.Delete.File)
		}
	}
	return errors.Join(errs...)
}

// path resolves a path of the file against its directory.
func (f *File) path(name string) string {
	if filepath.IsAbs(name) || f.dir == "" {
		return name
	}
	return filepath.Join(f.dir, name)
}

// namespace is the scenario's default namespace.
func (f *File) namespace() string {
	if f.Namespace == "" {
		return "default"
	}
	return f.Namespace
}

// objRef is a KIND/NAME reference, resolved.
type objRef struct {
	Kind            *api.Kind
	Namespace, Name string
}

// parseRef parses KIND/NAME (kind as kubectl names it: job, deploy,
// pod...) or, with withNamespace, NAMESPACE/KIND/NAME; ns is the
// namespace of a reference that names none.
func parseRef(ref string, withNamespace bool, ns string) (objRef, error) {
	parts := strings.Split(ref, "/")
	switch {
	case len(parts) == 3 && withNamespace:
		ns, parts = parts[0], parts[1:]
	case len(parts) != 2 && withNamespace:
		return objRef{}, fmt.Errorf("%q: want KIND/NAME or NAMESPACE/KIND/NAME, such as job/job-b", ref)
	case len(parts) != 2:
		return objRef{}, fmt.Errorf("%q: want KIND/NAME, such as job/job-b", ref)
	}
	k, err := api.LookupResource(parts[0])
	if err != nil {
		return objRef{}, fmt.Errorf("%q: %w", ref, err)
	}
	if parts[1] == "" {
		return objRef{}, fmt.Errorf("%q: no name", ref)
	}
	if !k.Namespaced {
		ns = ""
	}
	return objRef{Kind: k, Namespace: ns, Name: parts[1]}, nil
}

// checkConfigName: a configuration's name is a DNS label (it heads a
// column).
func checkConfigName(name string) error {
	if ms := validation.IsDNS1123Label(name); len(ms) > 0 {
		return fmt.Errorf("%q: %s", name, strings.Join(ms, "; "))
	}
	return nil
}
