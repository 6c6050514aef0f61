package plugins_test

import (
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/plugins"
	"skiff.dev/skiff/controlplane/scheduler/plugintest"
)

// The harness a plugin's author runs: a table of clusters and the node
// the plugin alone would pick.
func TestFewestPods(t *testing.T) {
	n := plugintest.Node
	p := plugintest.Pod
	on := plugintest.OnNode
	for _, tc := range []struct {
		name string
		c    plugintest.Case
		best string
	}{
		{"the empty node", plugintest.Case{
			Nodes: []*api.Node{n("a"), n("b")},
			Pods:  []*api.Pod{p("x", on("a"))},
			Pod:   p("new"),
		}, "b"},
		{"the less busy of two", plugintest.Case{
			Nodes: []*api.Node{n("a"), n("b"), n("c")},
			Pods:  []*api.Pod{p("x", on("a")), p("y", on("a")), p("z", on("b")), p("w", on("c")), p("v", on("c"))},
			Pod:   p("new"),
		}, "b"},
		{"all equal: the first", plugintest.Case{Nodes: []*api.Node{n("a"), n("b")}, Pod: p("new")}, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := plugintest.Run(t.Context(), &plugins.FewestPods{}, tc.c)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Best(); got != tc.best {
				t.Errorf("best %q, want %q: %+v", got, tc.best, res)
			}
		})
	}
}

// The harness runs filters too: NodeResourcesFit on GPU nodes.
func TestHarnessFilters(t *testing.T) {
	fit, err := plugins.NewNodeResourcesFit(nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := plugintest.Run(t.Context(), fit, plugintest.Case{
		Nodes: []*api.Node{plugintest.Node("cpu-only"), plugintest.Node("gpu", plugintest.GPUs(8))},
		Pod:   plugintest.Pod("train", plugintest.GPULimit(2)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Get("cpu-only"); r.Fits || len(r.Reasons) != 1 || r.Reasons[0] != "Insufficient nvidia.com/gpu" {
		t.Errorf("cpu-only: %+v", r)
	}
	if got := res.Nodes(); len(got) != 1 || got[0] != "gpu" {
		t.Errorf("fitting nodes %v", got)
	}
}
