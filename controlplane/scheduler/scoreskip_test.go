package scheduler

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/controlplane/scheduler/framework"
	"skiff.dev/skiff/controlplane/scheduler/plugins"
)

// NodeAffinity and GPUTopology skip Score (PreScore) for a pod that has
// nothing for them to score. The scores, and so the trace and the chosen
// node, must be what running their Score on every node gives: the same
// cycle in a profile with their PreScore disabled.
func TestPreScoreSkipsChangeNoScore(t *testing.T) {
	s, err := New(fake.New(), parseConfig(t, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
- schedulerName: scores-everything
  plugins:
    preScore:
      disabled:
      - name: NodeAffinity
      - name: GPUTopology
`), Options{Recorder: &events{}})
	if err != nil {
		t.Fatal(err)
	}
	skipping, scoring := s.profiles["default-scheduler"], s.profiles["scores-everything"]
	if len(skipping.fwk.PreScore) != len(scoring.fwk.PreScore)+2 {
		t.Fatalf("PreScore plugins: %d in the default profile, %d with two disabled", len(skipping.fwk.PreScore), len(scoring.fwk.PreScore))
	}
	r := rand.New(rand.NewPCG(11, 24))
	var nodes []*api.Node
	for i := range 40 {
		zone := labels("zone", fmt.Sprint(r.IntN(3)))
		if i%2 == 0 { // GPUs with NVLink between some: GPUTopology scores them
			nodes = append(nodes, nvlinkNode(t, fmt.Sprintf("n%02d", i), [][2]int{{0, r.IntN(3) + 1}}, zone))
			continue
		}
		nodes = append(nodes, gpuNode(fmt.Sprintf("n%02d", i), r.IntN(9), zone))
	}
	snap := NewSnapshot(nodes, nil)
	skipped := 0
	for i := range 200 {
		pod := gpuPod(fmt.Sprintf("p%d", i), r.IntN(3), cpu(fmt.Sprintf("%dm", 100*r.IntN(10))))
		if r.IntN(2) == 0 {
			pod.Spec.Affinity = &api.Affinity{NodeAffinity: &api.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []api.PreferredSchedulingTerm{
				{Weight: 10, Preference: api.NodeSelectorTerm{MatchExpressions: []api.NodeSelectorRequirement{{Key: "zone", Operator: "In", Values: []string{"1"}}}}},
			}}}
		}
		state := framework.NewCycleState()
		want, _, err := s.algorithm(scoring).schedule(t.Context(), state, pod, snap, 0, s.now)
		if err != nil {
			t.Fatal(err)
		}
		state = framework.NewCycleState()
		got, _, err := s.algorithm(skipping).schedule(t.Context(), state, pod, snap, 0, s.now)
		if err != nil {
			t.Fatal(err)
		}
		if skip, _ := skipping.fwk.RunPreScore(t.Context(), state, pod, nil); skip[plugins.NodeAffinityName] || skip[plugins.GPUTopologyName] {
			skipped++
		}
		if got.SelectedNode != want.SelectedNode || !reflect.DeepEqual(got.Scores, want.Scores) {
			t.Fatalf("pod %d: with the skips chose %s, scores %+v\nscoring every node chose %s, scores %+v", i, got.SelectedNode, got.Scores, want.SelectedNode, want.Scores)
		}
	}
	if skipped < 50 {
		t.Fatalf("only %d of 200 pods skipped a score; the comparison proves little", skipped)
	}
}

// A profile's addedAffinity (NodeAffinityArgs) applies to every pod: its
// required terms filter (before the pod's own, and never answered for
// every node at once), its preferred terms score even a pod with no
// affinity of its own.
func TestAddedAffinity(t *testing.T) {
	s, err := New(fake.New(), parseConfig(t, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: NodeAffinity
    args:
      addedAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
          - matchExpressions:
            - {key: zone, operator: In, values: ["1", "2"]}
        preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 10
          preference:
            matchExpressions:
            - {key: zone, operator: In, values: ["2"]}
`), Options{Recorder: &events{}})
	if err != nil {
		t.Fatal(err)
	}
	snap := NewSnapshot([]*api.Node{gpuNode("n0", 0, labels("zone", "0")), gpuNode("n1", 0, labels("zone", "1")), gpuNode("n2", 0, labels("zone", "2"))}, nil)
	res, err := s.ScheduleOne(t.Context(), gpuPod("plain", 0, cpu("100m")), snap)
	if err != nil {
		t.Fatal(err)
	}
	// n1 and n2 are alike but for the preferred term; ties would go to n1.
	if res.SelectedNode != "n2" || len(res.Nodes) != 3 || res.Nodes[0].Status.Message() != plugins.ReasonEnforcedNodeAffinity {
		t.Fatalf("chose %q; verdicts %+v", res.SelectedNode, res.Nodes)
	}
	res, err = s.ScheduleOne(t.Context(), gpuPod("nowhere", 0, func(p *api.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "9"} }), snap)
	if err != nil {
		t.Fatal(err)
	}
	want := "0/3 nodes are available: 1 node(s) didn't match scheduler-enforced node affinity, 2 node(s) didn't match Pod's node affinity/selector."
	if !strings.HasPrefix(res.Message, want) {
		t.Fatalf("message %q, want it to begin %q", res.Message, want)
	}
}
