package scenario

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const header = "apiVersion: skiff.dev/v1alpha1\nkind: Scenario\nmetadata: {name: t}\nnodes: [{name: gpu, gpus: 8}]\n"

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string // each in the error
	}{
		{"unknown field names its path", header + "steps:\n- advance: 1m\n  expect:\n  - pods: job/a\n    onNod: x\n",
			[]string{`unknown field "steps[0].expect[0].onNod"`}},
		{"unknown top-level field", header + "stepz: []\nsteps: [{advance: 1m}]\n", []string{`unknown field "stepz"`}},
		{"duplicate key", header + "namespace: a\nnamespace: b\nsteps: [{advance: 1m}]\n", []string{`"namespace"`}},
		{"wrong type", header + "steps: [{advance: 1m, expect: [{maxFragmentedGPUs: many}]}]\n", []string{"maxFragmentedGPUs"}},
		{"wrong version and kind", "apiVersion: v1\nkind: Pod\nnodes: [{name: gpu}]\nsteps: [{advance: 1m}]\n",
			[]string{`apiVersion: "v1" is not supported (skiff.dev/v1alpha1)`, `kind: "Pod" is not supported (Scenario)`}},
		{"no nodes, no steps", "apiVersion: skiff.dev/v1alpha1\nkind: Scenario\n", []string{"nodes: a scenario needs nodes", "steps: a scenario has at least one step"}},
		{"two actions", header + "steps: [{advance: 1m, failNode: gpu}]\n", []string{"steps[0]: a step has exactly one of apply, delete, failNode and advance (2 given)"}},
		{"bad duration", header + "steps: [{advance: soon}]\n", []string{`steps[0].advance: "soon"`}},
		{"pods without a test", header + "steps: [{advance: 1m, expect: [{pods: job/a}]}]\n", []string{"steps[0].expect[0]: pods needs a test"}},
		{"a test without pods", header + "steps: [{advance: 1m, expect: [{onNode: gpu}]}]\n", []string{"steps[0].expect[0]: an expectation has exactly one of"}},
		{"bad reference", header + "steps: [{advance: 1m, expect: [{pods: gizmo/a, running: true}, {apart: [job/a]}]}]\n",
			[]string{`steps[0].expect[0].pods: "gizmo/a"`, "steps[0].expect[1].apart: name at least two"}},
		{"refs only for delete", header + "steps: [{apply: {refs: [job/a]}}]\n", []string{"steps[0].apply.refs: only delete takes references"}},
		{"bad inline object", header + "steps: [{apply: {objects: [{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containerz: []}}]}}]\n",
			[]string{"steps[0].apply.objects[0]:", "containerz"}},
		{"bad config name", header + "configs: [{name: Bin_Pack}]\nsteps: [{advance: 1m}]\n", []string{`configs[0].name: "Bin_Pack"`}},
		{"bad node group", "apiVersion: skiff.dev/v1alpha1\nkind: Scenario\nnodes: [{name: gpu, gpus: -1, cpu: lots}]\nsteps: [{advance: 1m}]\n",
			[]string{"nodes[0].gpus: -1", `nodes[0].cpu: "lots"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestLoadChecksFiles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s.yaml")
	data := header + "cluster: {file: missing.yaml}\nconfigs: [{name: b, file: nope.yaml}]\nsteps: [{apply: {file: gone.yaml}}]\n"
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	for _, w := range []string{"cluster.file:", "configs[0].file:", "steps[0].apply.file:"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Load: %v, want it to name %s", err, w)
		}
	}
}

func TestLoadExamples(t *testing.T) {
	for _, p := range []string{"../examples/homework/task3/scenario.yaml", "testdata/failover.yaml"} {
		if _, err := Load(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// TestRunRefusesBadConfig: a configuration that does not load stops the
// run before any cluster starts, with kube-scheduler's words.
func TestRunRefusesBadConfig(t *testing.T) {
	f, err := Load("testdata/failover.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	data := "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofilez: []\n"
	if err := os.WriteFile(bad, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	results, err := Run(t.Context(), f, Options{Configs: []Config{{Name: "default"}, {Name: "alice", File: bad}}})
	if err == nil || !strings.Contains(err.Error(), "configuration alice:") || !strings.Contains(err.Error(), "profilez") || len(results) != 0 {
		t.Fatalf("Run: %v (%d results), want configuration alice's error naming profilez before anything ran", err, len(results))
	}
}

func TestParseConfigFlag(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "alice.yaml")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err := ParseConfigFlag(file); err != nil || c.Name != "alice" || c.File != file {
		t.Errorf("ParseConfigFlag(%q) = %+v, %v; want alice", file, c, err)
	}
	if c, err := ParseConfigFlag("binpack=" + file); err != nil || c.Name != "binpack" {
		t.Errorf("binpack=FILE: %+v, %v", c, err)
	}
	for _, bad := range []string{"binpack=", "Bad_Name=" + file, filepath.Join(dir, "missing.yaml")} {
		if _, err := ParseConfigFlag(bad); err == nil {
			t.Errorf("ParseConfigFlag(%q): no error", bad)
		}
	}
}

// TestFailover runs a scenario with a node failure and one expectation
// that cannot hold: the run returns *Unmet naming exactly that one, with
// what was found; the failover's expectations hold.
func TestFailover(t *testing.T) {
	t.Parallel()
	f, err := Load("testdata/failover.yaml")
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(t.Context(), f, Options{})
	var unmet *Unmet
	if !errors.As(err, &unmet) {
		t.Fatalf("Run: %v, want *Unmet", err)
	}
	want := "configuration default, step 1 (web starts): deployment/web onNode gpu-2: found web-"
	if len(unmet.Failures) != 1 || !strings.HasPrefix(unmet.Failures[0], want) || !strings.HasSuffix(unmet.Failures[0], " on gpu-1") {
		t.Fatalf("failures %q, want one: %s... on gpu-1", unmet.Failures, want)
	}
	if len(results) != 1 || len(results[0].Steps) != 3 {
		t.Fatalf("results %+v", results)
	}
	if u := results[0].Steps[2].Usage; u.Used != 0 || u.Pending != 0 {
		t.Errorf("after web was deleted: %s, want nothing used", u)
	}
	after := results[0].Steps[1]
	if u := after.Usage; u.GPUs != 8 || u.Used != 8 {
		t.Errorf("after gpu-1 failed: %s, want the 8 GPUs of gpu-2 only, all used", u)
	}
	for _, c := range after.Checks {
		if c.Failure != "" {
			t.Errorf("after the failure: %s: %s", c.Expectation, c.Failure)
		}
	}
}
