package scheduler

import (
	"path/filepath"
	"strings"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/controlplane/scheduler/config"
	"skiff.dev/skiff/controlplane/scheduler/framework"
	"skiff.dev/skiff/controlplane/scheduler/plugins"
)

func pluginNames[P framework.Plugin](ps []P) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name())
	}
	return strings.Join(out, ",")
}

func scoreNames(ps []framework.WeightedScorePlugin) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name()+"="+string(rune('0'+p.Weight)))
	}
	return strings.Join(out, ",")
}

// The docs' example files either build (their plugins are skiff's) or
// fail with the words kube-scheduler uses for a plugin it does not have
// (the docs' MyPlugin, CustomPlugin1, ...).
func TestDocsConfigurationsBuild(t *testing.T) {
	for file, want := range map[string]string{
		"valid-docs-binpack-mostallocated.yaml":            "",
		"valid-docs-binpack-requestedtocapacityratio.yaml": "",
		"valid-docs-config-minimal.yaml":                   "",
		"valid-docs-config-multiple-profiles.yaml":         "",
		"valid-docs-spread-default-constraints.yaml":       "",
		"valid-docs-spread-no-defaults.yaml":               "",
		"valid-docs-config-score-custom.yaml":              `creating profile for scheduler name default-scheduler: ScorePlugin "MyCustomPluginA" does not exist`,
		"valid-docs-config-multipoint.yaml":                `creating profile for scheduler name multipoint-scheduler: PreFilterPlugin "MyPlugin" does not exist`,
		"valid-docs-config-non-multipoint.yaml":            `PreFilterPlugin "MyPlugin" does not exist`,
		"valid-docs-config-multipoint-disabled.yaml":       `PreFilterPlugin "MyPlugin" does not exist`,
		"valid-docs-config-score-reorder.yaml":             `ScorePlugin "DefaultScore2" does not exist`,
		"valid-docs-config-multipoint-precedence.yaml":     `PreFilterPlugin "CustomQueueSort" does not exist`,
	} {
		t.Run(file, func(t *testing.T) {
			cfg, err := config.Load(filepath.Join("config", "testdata", file))
			if err != nil {
				t.Fatal(err)
			}
			_, err = New(fake.New(), cfg, Options{Recorder: &events{}})
			if want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("err = %v, want %q", err, want)
			}
		})
	}
}

func TestProfilePlugins(t *testing.T) {
	s, err := New(fake.New(), parseConfig(t, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
- schedulerName: no-scoring-scheduler
  plugins:
    preScore:
      disabled:
      - name: '*'
    score:
      disabled:
      - name: '*'
- schedulerName: reordered
  plugins:
    filter:
      enabled:
      - name: NodeResourcesFit
      disabled:
      - name: NodePorts
    score:
      enabled:
      - name: GPUTopology
        weight: 5
    postFilter:
      disabled:
      - name: DefaultPreemption
`), Options{Recorder: &events{}})
	if err != nil {
		t.Fatal(err)
	}
	def := s.profiles["default-scheduler"].fwk
	if got, want := pluginNames(def.Filter), "NodeUnschedulable,NodeName,TaintToleration,NodeReady,NodeAffinity,NodePorts,VolumeBinding,NodeResourcesFit,PodTopologySpread,InterPodAffinity,DynamicResources,HAMi"; got != want {
		t.Errorf("default filters = %s, want %s", got, want)
	}
	if got, want := scoreNames(def.Score), "TaintToleration=3,NodeAffinity=2,NodeResourcesFit=1,PodTopologySpread=2,InterPodAffinity=2,NodeResourcesBalancedAllocation=1,GPUTopology=2,HAMi=3"; got != want {
		t.Errorf("default scores = %s, want %s", got, want)
	}
	if got := pluginNames(def.PostFilter); got != DefaultPreemptionName {
		t.Errorf("default postFilter = %s", got)
	}
	if got := pluginNames(def.QueueSort); got != plugins.PrioritySortName {
		t.Errorf("queueSort = %s", got)
	}
	if ns := s.profiles["no-scoring-scheduler"].fwk; len(ns.Score) != 0 || len(ns.PreScore) != 0 || len(ns.Filter) != len(def.Filter) {
		t.Errorf("no-scoring: %d score, %d filter plugins", len(ns.Score), len(ns.Filter))
	}
	r := s.profiles["reordered"].fwk
	// An extension point that names a multiPoint plugin moves it first.
	if got, want := pluginNames(r.Filter), "NodeResourcesFit,NodeUnschedulable,NodeName,TaintToleration,NodeReady,NodeAffinity,VolumeBinding,PodTopologySpread,InterPodAffinity,DynamicResources,HAMi"; got != want {
		t.Errorf("reordered filters = %s, want %s", got, want)
	}
	if got, want := scoreNames(r.Score), "GPUTopology=5,TaintToleration=3,NodeAffinity=2,NodeResourcesFit=1,PodTopologySpread=2,InterPodAffinity=2,NodeResourcesBalancedAllocation=1,HAMi=3"; got != want {
		t.Errorf("reordered scores = %s, want %s", got, want)
	}
	if len(r.PostFilter) != 0 {
		t.Errorf("reordered postFilter = %s", pluginNames(r.PostFilter))
	}
	// Plugins configured alike are made once: DRA's and VolumeBinding's
	// state is the scheduler's.
	if def.Reserve[0] != r.Reserve[0] || len(s.sources) != 5 { // DynamicResources, InterPodAffinity, PodTopologySpread, VolumeBinding, HAMi (its device config)
		t.Errorf("DynamicResources made per profile: %d event sources", len(s.sources))
	}
}

func TestProfileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"not that extension point", `profiles:
- plugins:
    filter:
      enabled:
      - name: DefaultBinder`, `creating profile for scheduler name default-scheduler: plugin "DefaultBinder" does not extend FilterPlugin plugin`},
		{"twice", `profiles:
- plugins:
    multiPoint:
      enabled:
      - name: NodeName
      - name: NodeName`, `plugin "NodeName" already registered as "FilterPlugin"`},
		{"no binder", `profiles:
- plugins:
    bind:
      disabled:
      - name: '*'`, `at least one bind plugin is needed for profile with scheduler name "default-scheduler"`},
		{"no queue sort", `profiles:
- plugins:
    multiPoint:
      disabled:
      - name: PrioritySort`, `only one queue sort plugin required for profile with scheduler name "default-scheduler", but got 0`},
		{"args for a plugin without", `profiles:
- pluginConfig:
  - name: NodeName
    args: {x: 1}`, `initializing plugin "NodeName": plugin NodeName takes no args`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := parseConfig(t, "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"+tc.yaml)
			_, err := New(fake.New(), cfg, Options{Recorder: &events{}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// Pods pick a profile with spec.schedulerName; a pod naming no profile is
// left alone: Pending, no event, no status, as in Kubernetes.
func TestTwoProfilesBySchedulerName(t *testing.T) {
	cfg := parseConfig(t, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
- schedulerName: binpack
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources:
        - {name: nvidia.com/gpu, weight: 1}
`)
	named := func(name string) func(*api.Pod) { return func(p *api.Pod) { p.Spec.SchedulerName = name } }
	f := newFixture(t, cfg, gpuNode("empty", 8), gpuNode("half", 8), gpuPod("running", 4, onNode("half")),
		gpuPod("spread", 1), gpuPod("packed", 1, named("binpack")), gpuPod("orphan", 1, named("no-such-scheduler")))
	for range 3 {
		f.step()
	}
	if n := f.nodeOf("gpu-demo", "spread"); n != "empty" {
		t.Errorf("default-scheduler's pod on %q, want empty (LeastAllocated)", n)
	}
	if n := f.nodeOf("gpu-demo", "packed"); n != "half" {
		t.Errorf("binpack's pod on %q, want half (MostAllocated)", n)
	}
	orphan := f.pod("gpu-demo", "orphan")
	if orphan.Spec.NodeName != "" || len(orphan.Status.Conditions) != 0 || f.s.queue.Where("gpu-demo/orphan") != "" {
		t.Errorf("orphan: node %q, conditions %v, queue %q", orphan.Spec.NodeName, orphan.Status.Conditions, f.s.queue.Where("gpu-demo/orphan"))
	}
	for _, e := range f.ev.take() {
		if strings.Contains(e, "orphan") {
			t.Errorf("event for a pod of another scheduler: %s", e)
		}
	}
}

// A profile without DefaultPreemption never evicts.
func TestPreemptionDisabledByConfig(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		evicts     bool
	}{
		{"default", "", true},
		{"postFilter disabled", `profiles:
- plugins:
    postFilter:
      disabled:
      - name: DefaultPreemption`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := parseConfig(t, "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"+tc.yaml)
			f := newFixture(t, cfg, gpuNode("node-1", 1), gpuPod("low", 1, onNode("node-1")), gpuPod("high", 1, priority(1000)))
			res := f.step()
			if got := res.Nominated != ""; got != tc.evicts {
				t.Fatalf("nominated %q, want eviction %v\n%s", res.Nominated, tc.evicts, Explain(res))
			}
			if !tc.evicts && !strings.HasSuffix(res.Message, "1 Insufficient nvidia.com/gpu.") {
				t.Errorf("message = %q", res.Message)
			}
		})
	}
}

func TestMinCandidateNodes(t *testing.T) {
	p := &defaultPreemption{minPct: 10, minAbs: 100}
	for _, tc := range []struct{ nodes, want int }{{50, 50}, {500, 100}, {5000, 500}} {
		if got := p.numCandidates(tc.nodes); got != tc.want {
			t.Errorf("numCandidates(%d) = %d, want %d", tc.nodes, got, tc.want)
		}
	}
	// minCandidateNodesAbsolute 1: the first node where eviction works wins,
	// not the best one.
	cfg := parseConfig(t, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- pluginConfig:
  - name: DefaultPreemption
    args:
      minCandidateNodesPercentage: 0
      minCandidateNodesAbsolute: 1
`)
	f := newFixture(t, cfg, gpuNode("a", 1), gpuNode("b", 1),
		gpuPod("mid", 1, onNode("a"), priority(500)), gpuPod("low", 1, onNode("b"), priority(1)), gpuPod("high", 1, priority(1000)))
	if res := f.step(); res.Nominated != "a" {
		t.Errorf("nominated %q, want a (the first candidate)", res.Nominated)
	}
}

// Every scheduler configuration under examples/ loads and builds.
func TestExampleSchedulerConfigs(t *testing.T) {
	files, _ := filepath.Glob("../../examples/homework/task3/scheduler-*.yaml")
	more, _ := filepath.Glob("../../examples/scheduler/*/*.yaml")
	files = append(files, more...)
	if len(files) < 3 {
		t.Fatalf("found only %v", files)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			cfg, err := config.Load(f)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := New(fake.New(), cfg, Options{Recorder: &events{}}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
