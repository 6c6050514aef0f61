package scheduler

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// A pod that no node can take is answered for every node at once when the
// snapshot's summary allows it (findFeasible, Framework.RunFilterEveryNode).
// Whichever way a cycle went, each node's verdict must be what running
// the filters on that node gives, in the order the nodes are visited.
func TestEveryNodeVerdictIsWhatVisitsFind(t *testing.T) {
	r := rand.New(rand.NewPCG(24, 26))
	s, p := newDefaultScheduler(t)
	zones := []string{"a", "b", "c"}
	var answered, visited int
	for round := range 60 {
		// Some clusters have cordoned, tainted or not-ready nodes (all of
		// them, in a few): the filters before NodeAffinity then cannot
		// answer for every node, or answer with their own rejection.
		every := func(p int) bool { return round%4 == 1 && r.IntN(p) == 0 || round%8 == 5 }
		var nodes []*api.Node
		for i := range 1 + r.IntN(300) {
			n := gpuNode(fmt.Sprintf("n%03d", i), r.IntN(3))
			if z := r.IntN(4); z < len(zones) {
				n.Labels["zone"] = zones[z]
			}
			if every(20) {
				n.Spec.Unschedulable = true
			}
			if round%4 == 2 && r.IntN(30) == 0 {
				n.Spec.Taints = []api.Taint{{Key: "gpu", Value: "only", Effect: api.TaintEffectNoSched}}
			}
			if round%4 == 3 && r.IntN(30) == 0 {
				n.Status.Conditions[0].Status = api.ConditionUnknown
			}
			nodes = append(nodes, n)
		}
		var running []*api.Pod // some nodes full: NodeResourcesFit turns the pod away there
		for i := range len(nodes) / 3 {
			running = append(running, gpuPod(fmt.Sprintf("r%d", i), 0, onNode(nodes[r.IntN(len(nodes))].Name), cpu("7500m")))
		}
		snap := NewSnapshot(nodes, running)
		for i := range 8 {
			pod := gpuPod(fmt.Sprintf("p%d-%d", round, i), 0, cpu("1"))
			switch r.IntN(5) {
			case 0:
				pod.Spec.NodeSelector = map[string]string{"zone": "nowhere"}
			case 1:
				pod.Spec.NodeSelector = map[string]string{"zone": zones[r.IntN(len(zones))]}
			case 2:
				pod.Spec.Affinity = &api.Affinity{NodeAffinity: &api.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &api.NodeSelector{
					NodeSelectorTerms: []api.NodeSelectorTerm{
						{MatchExpressions: []api.NodeSelectorRequirement{{Key: "zone", Operator: "In", Values: []string{"x", "y"}}}},
						{MatchExpressions: []api.NodeSelectorRequirement{{Key: "zone", Operator: "In", Values: []string{"y", zones[r.IntN(len(zones))]}}}},
					}}}}
			case 3:
				pod.Spec.Affinity = &api.Affinity{NodeAffinity: &api.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &api.NodeSelector{
					NodeSelectorTerms: []api.NodeSelectorTerm{
						{MatchExpressions: []api.NodeSelectorRequirement{{Key: "zone", Operator: "Exists"}, {Key: "zone", Operator: "In", Values: []string{"x"}}}},
						{},
					}}}}
			}
			if r.IntN(4) == 0 {
				pod.Spec.Tolerations = []api.Toleration{{Key: api.TaintUnschedulable, Operator: "Exists"}}
			}
			start := r.IntN(len(nodes))
			a := s.algorithm(p)
			state := framework.NewCycleState()
			res, processed, err := a.schedule(t.Context(), state, pod, snap, start, s.now)
			if err != nil {
				t.Fatal(err)
			}
			// The oracle: every filter on each node, on a state of its own
			// (the cycle's leaves out of its plan the filters that pass on
			// every node).
			own := framework.NewCycleState()
			own.SetNodes(snap.Nodes())
			if st, _ := p.fwk.RunPreFilter(t.Context(), own, pod); !st.IsSuccess() {
				t.Fatal(st)
			}
			if _, _, ok := p.fwk.RunFilterEveryNode(t.Context(), own.Clone(), pod, snap); ok {
				answered++
			} else if res.SelectedNode == "" {
				visited++
			}
			if res.SelectedNode == "" && (processed != len(nodes) || len(res.Nodes) != len(nodes)) {
				t.Fatalf("round %d pod %d: no node fits, yet %d verdicts of %d nodes (processed %d)", round, i, len(res.Nodes), len(nodes), processed)
			}
			for j, got := range res.Nodes {
				ni := snap.Nodes()[(start+j)%len(nodes)]
				want := a.filterNode(t.Context(), own, pod, ni)
				if got.Node != want.Node || got.Plugin != want.Plugin || got.Status.Code() != want.Status.Code() || got.Status.Message() != want.Status.Message() {
					t.Fatalf("round %d pod %d node %d: verdict %s/%d %v, filtering the node gives %s/%d %v",
						round, i, j, got.Node, got.Plugin, got.Status, want.Node, want.Plugin, want.Status)
				}
			}
		}
	}
	// Both ways must have been taken, or the comparison proves nothing.
	if answered < 50 || visited < 50 {
		t.Fatalf("pods answered for every node at once: %d, unschedulable pods filtered node by node: %d; want at least 50 of each", answered, visited)
	}
}

// The message a student reads is the one node-by-node filtering wrote.
func TestNoNodeMatchesTheSelectorMessage(t *testing.T) {
	s, p := newDefaultScheduler(t)
	nodes := []*api.Node{gpuNode("a", 8), gpuNode("b", 8), gpuNode("c", 8, func(n *api.Node) { n.Spec.Unschedulable = true })}
	pod := gpuPod("h100", 1, func(p *api.Pod) {
		p.Spec.NodeSelector = map[string]string{api.LabelGPUProduct: "NVIDIA-H100-80GB-HBM3"}
	})
	for _, tc := range []struct {
		nodes    []*api.Node
		answered bool
		want     string
	}{
		{nodes[:2], true, "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. " +
			"preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."},
		{nodes, false, "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) didn't match Pod's node affinity/selector. " +
			"preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."},
	} {
		snap := NewSnapshot(tc.nodes, nil)
		res, err := s.ScheduleOne(t.Context(), pod, snap)
		if err != nil {
			t.Fatal(err)
		}
		state := framework.NewCycleState()
		if s, _ := p.fwk.RunPreFilter(t.Context(), state, pod); !s.IsSuccess() {
			t.Fatal(s)
		}
		if _, _, ok := p.fwk.RunFilterEveryNode(t.Context(), state, pod, snap); ok != tc.answered {
			t.Errorf("%d nodes: answered for every node at once %v, want %v", len(tc.nodes), ok, tc.answered)
		}
		if res.Message != tc.want {
			t.Errorf("%d nodes: message\n %q\nwant\n %q", len(tc.nodes), res.Message, tc.want)
		}
	}
}

// What the summary answers for, on a cluster of Ready nodes, none cordoned
// or tainted: the pods that name a label no node has.
func TestWhichPodsAreAnsweredForEveryNode(t *testing.T) {
	_, p := newDefaultScheduler(t)
	snap := NewSnapshot([]*api.Node{gpuNode("a", 8, labels("zone", "1")), gpuNode("b", 8, labels("zone", "2"))}, nil)
	required := func(terms ...api.NodeSelectorTerm) func(*api.Pod) {
		return func(p *api.Pod) {
			p.Spec.Affinity = &api.Affinity{NodeAffinity: &api.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &api.NodeSelector{NodeSelectorTerms: terms}}}
		}
	}
	in := func(values ...string) api.NodeSelectorTerm {
		return api.NodeSelectorTerm{MatchExpressions: []api.NodeSelectorRequirement{{Key: "zone", Operator: "In", Values: values}}}
	}
	exists := api.NodeSelectorTerm{MatchExpressions: []api.NodeSelectorRequirement{{Key: "gpu", Operator: "Exists"}}}
	for _, tc := range []struct {
		name string
		edit func(*api.Pod)
		want bool
	}{
		{"no selector", func(*api.Pod) {}, false},
		{"selector some node matches", func(p *api.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "1"} }, false},
		{"selector no node matches", func(p *api.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "1", "gpu": "h100"} }, true},
		{"In values no node has", required(in("3", "4")), true},
		{"In a value some node has", required(in("3", "2")), false},
		{"one term some node may match", required(in("3"), exists), false},
		{"an empty term and an In no node has", required(api.NodeSelectorTerm{}, in("5")), true},
		{"names a node", onNode("a"), false},
	} {
		pod := gpuPod("p", 0, tc.edit)
		state := framework.NewCycleState()
		if st, _ := p.fwk.RunPreFilter(t.Context(), state, pod); !st.IsSuccess() {
			t.Fatal(st)
		}
		if _, _, ok := p.fwk.RunFilterEveryNode(t.Context(), state, pod, snap); ok != tc.want {
			t.Errorf("%s: answered for every node at once %v, want %v", tc.name, ok, tc.want)
		}
	}
}

// The summary follows every node event, and a snapshot's label counts
// answer only while they still describe its nodes.
func TestNodeSummaryFollowsTheCache(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 24))
	c := NewCache(0)
	kept := &Snapshot{} // brought up to date step by step, as the scheduler's
	for step := range 3000 {
		name := fmt.Sprintf("n%02d", r.IntN(40))
		switch op := r.IntN(10); {
		case op < 6:
			n := gpuNode(name, 1, labels("zone", fmt.Sprint(r.IntN(3))))
			n.Spec.Unschedulable = r.IntN(4) == 0
			if r.IntN(4) == 0 {
				n.Spec.Taints = []api.Taint{{Key: "k", Effect: []string{api.TaintEffectNoSched, api.TaintEffectNoExec, api.TaintEffectPrefNo}[r.IntN(3)]}}
			}
			n.Status.Conditions[0].Status = []string{api.ConditionTrue, api.ConditionTrue, api.ConditionFalse, api.ConditionUnknown}[r.IntN(4)]
			c.AddNode(n)
		case op < 8:
			c.RemoveNode(name)
		default: // a pod on a node that may not exist (yet)
			c.AddPod(gpuPod(fmt.Sprintf("p%d", step), 0, onNode(name), cpu("100m")))
		}
		fresh := &Snapshot{}
		c.Snapshot(fresh)
		c.Snapshot(kept)
		for _, snap := range []*Snapshot{fresh, kept} {
			var want nodeCounts
			wantLabels := map[labelPair]int{}
			var names []string
			for _, ni := range snap.Nodes() {
				want.add(ni, 1)
				for k, v := range ni.Node.Labels {
					wantLabels[labelPair{k, v}]++
				}
				names = append(names, ni.Node.Name)
			}
			if snap.counts != want || snap.NumNodes() != len(names) || !slices.Equal(snap.names, names) {
				t.Fatalf("step %d: counts %+v of %d nodes %v, want %+v of %v", step, snap.counts, snap.NumNodes(), snap.names, want, names)
			}
			for _, l := range []labelPair{{"zone", "0"}, {"zone", "1"}, {"zone", "2"}, {"zone", "3"}, {api.LabelHostname, name}} {
				if n, ok := snap.NodesWithLabel(l.key, l.value); !ok || n != wantLabels[l] {
					t.Fatalf("step %d: %d nodes with %s=%s (ok %v), want %d", step, n, l.key, l.value, ok, wantLabels[l])
				}
			}
			if !maps.Equal(c.summary.labels, wantLabels) {
				t.Fatalf("step %d: the cache counts labels %v, its nodes carry %v", step, c.summary.labels, wantLabels)
			}
		}
	}

	// A relabelled node: an older snapshot can no longer answer; a
	// heartbeat (a new object with the same labels) changes nothing.
	c = NewCache(0)
	c.AddNode(gpuNode("a", 1, labels("zone", "1")))
	old := &Snapshot{}
	c.Snapshot(old)
	c.AddNode(gpuNode("a", 1, labels("zone", "1")))
	if n, ok := old.NodesWithLabel("zone", "1"); !ok || n != 1 {
		t.Fatalf("after a heartbeat: %d nodes with zone=1 (ok %v), want 1", n, ok)
	}
	c.AddNode(gpuNode("a", 1, labels("zone", "2")))
	if _, ok := old.NodesWithLabel("zone", "1"); ok {
		t.Fatal("a snapshot taken before a node was relabelled still answers from the new labels")
	}
	c.Snapshot(old)
	if n, ok := old.NodesWithLabel("zone", "1"); !ok || n != 0 {
		t.Fatalf("after relabelling: %d nodes with zone=1 (ok %v), want 0", n, ok)
	}
}
