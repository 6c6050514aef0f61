package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/kube-scheduler/config/v1"
)

func TestLoadTestdata(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatal("no testdata", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			_, err := Load(path)
			valid := strings.HasPrefix(filepath.Base(path), "valid-")
			if valid != (err == nil) {
				t.Fatalf("valid=%v, err=%v", valid, err)
			}
		})
	}
}

func TestDefault(t *testing.T) {
	c := Default()
	if c.Parallelism != 16 || c.PercentageOfNodesToScore != 0 || c.PodInitialBackoff != time.Second || c.PodMaxBackoff != 10*time.Second {
		t.Errorf("defaults: %+v", c)
	}
	if len(c.Profiles) != 1 || c.Profiles[0].SchedulerName != "default-scheduler" {
		t.Fatalf("profiles: %+v", c.Profiles)
	}
	p := c.Profiles[0]
	if got, want := names(p.Plugins.MultiPoint.Enabled), names(DefaultPlugins().MultiPoint.Enabled); got != want {
		t.Errorf("multiPoint = %s, want %s", got, want)
	}
	fit, ok := p.Args("NodeResourcesFit").(*v1.NodeResourcesFitArgs)
	if !ok || fit.ScoringStrategy.Type != v1.LeastAllocated || len(fit.ScoringStrategy.Resources) != 2 {
		t.Errorf("NodeResourcesFit args = %#v", p.Args("NodeResourcesFit"))
	}
	if a, ok := p.Args("Coscheduling").(*CoschedulingArgs); !ok || a.PermitWaitingTime() != 60*time.Second {
		t.Errorf("Coscheduling args = %#v", p.Args("Coscheduling"))
	}
	// An empty file of the right kind is the default.
	d, err := Parse([]byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"))
	if err != nil {
		t.Fatal(err)
	}
	if names(d.Profiles[0].Plugins.MultiPoint.Enabled) != names(p.Plugins.MultiPoint.Enabled) || len(d.Profiles[0].PluginConfig) != len(p.PluginConfig) {
		t.Errorf("empty file differs from Default: %+v", d.Profiles[0])
	}
}

func names(ps []v1.Plugin) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return strings.Join(out, ",")
}

func TestDocsExamplesValues(t *testing.T) {
	c, err := Load("testdata/valid-docs-binpack-mostallocated.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fit := c.Profiles[0].Args("NodeResourcesFit").(*v1.NodeResourcesFitArgs)
	if fit.ScoringStrategy.Type != v1.MostAllocated || len(fit.ScoringStrategy.Resources) != 4 || fit.ScoringStrategy.Resources[2].Name != "intel.com/foo" || fit.ScoringStrategy.Resources[2].Weight != 3 {
		t.Errorf("MostAllocated: %+v", fit.ScoringStrategy)
	}
	if c.Profiles[0].SchedulerName != DefaultSchedulerName {
		t.Errorf("schedulerName = %q", c.Profiles[0].SchedulerName)
	}

	c, err = Load("testdata/valid-docs-binpack-requestedtocapacityratio.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fit = c.Profiles[0].Args("NodeResourcesFit").(*v1.NodeResourcesFitArgs)
	if s := fit.ScoringStrategy; s.Type != v1.RequestedToCapacityRatio || len(s.RequestedToCapacityRatio.Shape) != 2 || s.RequestedToCapacityRatio.Shape[1].Score != 10 {
		t.Errorf("RequestedToCapacityRatio: %+v", s)
	}

	c, err = Load("testdata/valid-docs-config-minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Kubeconfig != "/etc/srv/kubernetes/kube-scheduler/kubeconfig" {
		t.Errorf("kubeconfig = %q", c.Kubeconfig)
	}

	c, err = Load("testdata/valid-docs-config-multiple-profiles.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Profiles) != 2 || c.Profile("no-scoring-scheduler") == nil || c.Profile("default-scheduler") == nil {
		t.Fatalf("profiles: %+v", c.Profiles)
	}
	ns := c.Profile("no-scoring-scheduler").Plugins
	if ns.Score.Disabled[0].Name != "*" || ns.PreScore.Disabled[0].Name != "*" || len(ns.MultiPoint.Enabled) != len(DefaultPlugins().MultiPoint.Enabled) {
		t.Errorf("no-scoring plugins: %+v", ns)
	}
}

func TestMergePlugins(t *testing.T) {
	w := func(n int32) *int32 { return &n }
	def := &v1.Plugins{Score: v1.PluginSet{Enabled: []v1.Plugin{{Name: "A", Weight: w(1)}, {Name: "B", Weight: w(1)}, {Name: "C", Weight: w(1)}}}}
	for _, tc := range []struct {
		name   string
		custom v1.PluginSet
		want   string
	}{
		{"nothing", v1.PluginSet{}, "A1,B1,C1"},
		{"disable one", v1.PluginSet{Disabled: []v1.Plugin{{Name: "B"}}}, "A1,C1"},
		{"reweigh in place", v1.PluginSet{Enabled: []v1.Plugin{{Name: "B", Weight: w(5)}}}, "A1,B5,C1"},
		{"append", v1.PluginSet{Enabled: []v1.Plugin{{Name: "D", Weight: w(2)}}}, "A1,B1,C1,D2"},
		{"reorder with star", v1.PluginSet{Enabled: []v1.Plugin{{Name: "C", Weight: w(1)}, {Name: "A", Weight: w(1)}}, Disabled: []v1.Plugin{{Name: "*"}}}, "C1,A1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := *def
			d.Score.Enabled = append([]v1.Plugin(nil), def.Score.Enabled...)
			got := mergePlugins(&d, &v1.Plugins{Score: tc.custom}).Score.Enabled
			var s []string
			for _, p := range got {
				s = append(s, p.Name+string(rune('0'+*p.Weight)))
			}
			if strings.Join(s, ",") != tc.want {
				t.Errorf("got %v, want %s", s, tc.want)
			}
		})
	}
}

func TestErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []string
	}{
		{"invalid-unknown-field.yaml", []string{`strict decoding error: unknown field "profiles[0].plugins.score.enabled[0].wieght"`}},
		{"invalid-unknown-args-field.yaml", []string{`decoding .profiles[0].pluginConfig[0]`, `unknown field "scoringStrategy.resource"`}},
		{"invalid-duplicate-field.yaml", []string{`key "parallelism" already set in map`}},
		{"invalid-no-kind.yaml", []string{"Object 'Kind' is missing", "want apiVersion: kubescheduler.config.k8s.io/v1, kind: KubeSchedulerConfiguration"}},
		{"invalid-leader-election.yaml", []string{"leaderElection.leaderElect: Forbidden: skiff's scheduler runs inside the control plane", "clientConnection.qps: Forbidden"}},
		{"invalid-rtcr-shape.yaml", []string{
			"profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio.shape[1].utilization: Invalid value: 40: values must be sorted in increasing order",
			"profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio.shape[0].score: Invalid value: 11: not in valid range [0, 10]",
		}},
		{"invalid-many.yaml", []string{
			"parallelism: Invalid value: 0: should be an integer value greater than zero",
			"percentageOfNodesToScore: Invalid value: 120: not in valid range [0-100]",
			"podMaxBackoffSeconds: Invalid value: 1: must be greater than or equal to PodInitialBackoffSeconds",
			`profiles[0].plugins.filter.enabled[0]: Invalid value: "EBSLimits": was invalid in version "kubescheduler.config.k8s.io/v1"`,
			`profiles[0].pluginConfig[0].args.scoringStrategy.type: Unsupported value: "Balanced": supported values: "LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"`,
			"profiles[0].pluginConfig[0].args.scoringStrategy.resources[0].weight: Invalid value: 200: resource weight of cpu not in valid range (0, 100]",
			`profiles[0].pluginConfig[1]: Duplicate value: "NodeResourcesFit"`,
			"profiles[0].pluginConfig[2].args.hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]",
			"profiles[1].schedulerName: Duplicate value",
			"profiles[2].schedulerName: Required value",
			"profiles[2].plugins.queueSort: Invalid value",
			"must be the same for all profiles",
			"extenders[0].weight: Invalid value: 0: must have a positive weight applied to it",
			`extenders[1].managedResources[0].name: Invalid value: "cpu": is an invalid extended resource name`,
			"extenders: Invalid value: \"found 2 extenders implementing bind\": only one extender can implement bind",
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			_, err := Load(filepath.Join("testdata", tc.file))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestOldFormatPointsToNew(t *testing.T) {
	_, err := Load("testdata/invalid-old-format.yaml")
	if !errors.Is(err, ErrOldFormat) {
		t.Fatalf("err = %v", err)
	}
	for _, w := range []string{"kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration", "examples/homework/task3/scheduler-binpack.yaml"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, err)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "nope.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err = %v", err)
	}
}

func TestPluginConfigWithoutArgsIsDefaulted(t *testing.T) {
	c, err := Parse([]byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- pluginConfig:
  - name: NodeResourcesFit
  - name: MyOutOfTreePlugin
    args: {favourite: 7}
`))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Profiles[0]
	if fit, ok := p.Args("NodeResourcesFit").(*v1.NodeResourcesFitArgs); !ok || fit.ScoringStrategy.Type != v1.LeastAllocated {
		t.Errorf("NodeResourcesFit = %#v", p.Args("NodeResourcesFit"))
	}
	if p.Args("MyOutOfTreePlugin") == nil {
		t.Error("out-of-tree args dropped")
	}
}
