package scheduler

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/kube-scheduler/config/v1"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/controlplane/scheduler/config"
)

const a100 = "NVIDIA-A100-SXM4-40GB"

func TestFailedSchedulingMessages(t *testing.T) {
	never := "Never"
	threeNodes := []*api.Node{
		gpuNode("cpu-1", 0, labels("role", "cpu")),
		gpuNode("gpu-1", 1),
		gpuNode("gpu-2", 1),
	}
	affinityGPU := func(p *api.Pod) {
		p.Spec.Affinity = &api.Affinity{NodeAffinity: &api.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &api.NodeSelector{
			NodeSelectorTerms: []api.NodeSelectorTerm{{MatchExpressions: []api.NodeSelectorRequirement{{Key: "role", Operator: "DoesNotExist"}}}},
		}}}
	}
	tests := []struct {
		name  string
		cfg   *config.Config
		nodes []*api.Node
		pods  []*api.Pod
		pod   *api.Pod
		want  string
	}{
		{
			name: "course: one GPU, taken", cfg: defaultConfig(noPreemption),
			nodes: []*api.Node{gpuNode("node-1", 1)}, pods: []*api.Pod{gpuPod("a", 1, onNode("node-1"))},
			pod:  gpuPod("b", 1),
			want: "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
		},
		{
			name: "counts per reason, sorted", cfg: defaultConfig(noPreemption),
			nodes: threeNodes, pod: gpuPod("p", 2, affinityGPU),
			want: "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 Insufficient nvidia.com/gpu.",
		},
		{
			name: "preemption found no victims", cfg: config.Default(),
			nodes: []*api.Node{gpuNode("node-1", 1)}, pods: []*api.Pod{gpuPod("a", 1, onNode("node-1"))},
			pod:  gpuPod("b", 1),
			want: "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
		},
		{
			name: "preemption not helpful on some nodes", cfg: config.Default(),
			nodes: threeNodes, pod: gpuPod("p", 2, affinityGPU),
			want: "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 Insufficient nvidia.com/gpu. " +
				"preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod.",
		},
		{
			// Kubernetes' wording when no node can be helped: preemption
			// is skipped without looking at any node.
			name: "preemption not helpful anywhere", cfg: config.Default(),
			nodes: threeNodes, pod: gpuPod("p", 1, func(p *api.Pod) {
				p.Spec.NodeSelector = map[string]string{api.LabelGPUProduct: "NVIDIA-H100-80GB-HBM3"}
			}),
			want: "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. " +
				"preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
		},
		{
			name: "preemption victims would not be enough", cfg: config.Default(),
			nodes: []*api.Node{gpuNode("node-1", 1)}, pods: []*api.Pod{gpuPod("low", 1, onNode("node-1"))},
			pod:  gpuPod("big", 2, priority(100)),
			want: "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
		},
		{
			name: "preemptionPolicy Never", cfg: config.Default(),
			nodes: []*api.Node{gpuNode("node-1", 1)}, pods: []*api.Pod{gpuPod("a", 1, onNode("node-1"))},
			pod:  gpuPod("b", 1, priority(100), func(p *api.Pod) { p.Spec.PreemptionPolicy = &never }),
			want: "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: not eligible due to preemptionPolicy=Never.",
		},
		{
			name: "taints and cordon", cfg: defaultConfig(noPreemption),
			nodes: []*api.Node{
				gpuNode("a", 1, func(n *api.Node) {
					n.Spec.Taints = []api.Taint{{Key: api.TaintUnreachable, Effect: api.TaintEffectNoExec}}
				}),
				gpuNode("b", 1, func(n *api.Node) { n.Spec.Unschedulable = true }),
				gpuNode("c", 1, func(n *api.Node) { n.Status.Conditions[0].Status = api.ConditionFalse }),
			},
			pod:  gpuPod("p", 1),
			want: "0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, 1 node(s) were unschedulable.",
		},
		{
			name: "no nodes", cfg: config.Default(), pod: gpuPod("p", 1),
			want: "no nodes available to schedule pods",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(fake.New(), tt.cfg, Options{Recorder: &events{}})
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.ScheduleOne(t.Context(), tt.pod, NewSnapshot(tt.nodes, tt.pods))
			if err != nil {
				t.Fatal(err)
			}
			if res.SelectedNode != "" || res.Message != tt.want {
				t.Errorf("selected %q, message\n got %q\nwant %q", res.SelectedNode, res.Message, tt.want)
			}
		})
	}
}

// The course's contention lab: scale past the GPU count; the extra pod
// stays Pending with the message, an event and a trace, and waits in
// unschedulableQ. Deleting a GPU pod moves it back and it schedules.
func TestOverRequestStaysPendingUntilGPUFreed(t *testing.T) {
	f := newFixture(t, config.Default(), gpuNode("node-1", 1), gpuPod("gpu-inference-1", 1), gpuPod("gpu-inference-2", 1))
	res := f.step()
	if res.SelectedNode != "node-1" {
		t.Fatalf("first pod: selected %q", res.SelectedNode)
	}
	if got := f.pod("gpu-demo", "gpu-inference-1").Spec.NodeName; got != "node-1" {
		t.Fatalf("first pod bound to %q", got)
	}
	res = f.step()
	if res.SelectedNode != "" {
		t.Fatalf("second pod scheduled on %q", res.SelectedNode)
	}
	want := "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
	pending := f.pod("gpu-demo", "gpu-inference-2")
	if c := f.condition(pending); c.Status != api.ConditionFalse || c.Reason != "Unschedulable" || c.Message != want {
		t.Errorf("PodScheduled = %+v", c)
	}
	evs := f.ev.take()
	if !slices.Contains(evs, "gpu-demo/gpu-inference-1 Normal Scheduled: Successfully assigned gpu-demo/gpu-inference-1 to node-1") ||
		!slices.Contains(evs, "gpu-demo/gpu-inference-2 Warning FailedScheduling: "+want) {
		t.Errorf("events: %q", evs)
	}
	if w := f.s.queue.Where("gpu-demo/gpu-inference-2"); w != "unschedulable" {
		t.Fatalf("pending pod is in %q", w)
	}
	if f.cycle() != nil {
		t.Fatal("an unschedulable pod was retried with nothing changed")
	}

	// kubectl delete pod gpu-inference-1, 5s later (past the 1s backoff).
	f.clock = f.clock.Add(5 * time.Second)
	bound := f.pod("gpu-demo", "gpu-inference-1")
	if err := f.c.Delete(f.ctx, api.MustKindOf(bound), "gpu-demo", "gpu-inference-1", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.s.onPodDelete(bound)
	if w := f.s.queue.Where("gpu-demo/gpu-inference-2"); w != "active" {
		t.Fatalf("after the delete the pending pod is in %q, want active", w)
	}
	if res := f.step(); res.SelectedNode != "node-1" {
		t.Fatalf("retry: selected %q, message %q", res.SelectedNode, res.Message)
	}
	tr, err := f.c.GetTrace(f.ctx, "gpu-demo", "gpu-inference-2")
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, s := range tr.Spans {
		steps = append(steps, s.Step)
	}
	if want := []string{"filter", "preemption", "filter", "score", "bind"}; !slices.Equal(steps, want) {
		t.Errorf("trace steps %v, want %v", steps, want)
	}
}

// A pod that no node's labels match is not retried when a pod is deleted
// (freed room cannot help it) but is when a node gains the label; a pod
// that lacked a GPU is retried on the delete. Our own status writes move
// neither.
func TestRequeueOnlyWhenItCanHelp(t *testing.T) {
	h100 := func(p *api.Pod) {
		p.Spec.NodeSelector = map[string]string{api.LabelGPUProduct: "NVIDIA-H100-80GB-HBM3"}
	}
	f := newFixture(t, config.Default(), gpuNode("node-1", 1, labels(api.LabelGPUProduct, a100)),
		gpuPod("running", 1, onNode("node-1")), gpuPod("wants-gpu", 1), gpuPod("wants-h100", 1, h100))
	for range 2 {
		if res := f.step(); res.SelectedNode != "" {
			t.Fatalf("%s scheduled on %q", res.Pod, res.SelectedNode)
		}
	}
	h100Pod := f.pod("gpu-demo", "wants-h100")
	if c := f.condition(h100Pod); c.Message != "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. "+
		"preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling." {
		t.Errorf("wants-h100: PodScheduled message %q", c.Message)
	}
	for _, name := range []string{"wants-gpu", "wants-h100"} {
		if w := f.s.queue.Where("gpu-demo/" + name); w != "unschedulable" {
			t.Fatalf("%s after its status write: in %q, want unschedulable", name, w)
		}
	}

	f.clock = f.clock.Add(5 * time.Second) // past the backoff
	running := f.pod("gpu-demo", "running")
	if err := f.c.Delete(f.ctx, api.MustKindOf(running), "gpu-demo", "running", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.s.onPodDelete(running)
	if w := f.s.queue.Where("gpu-demo/wants-gpu"); w != "active" {
		t.Errorf("wants-gpu after the delete: in %q, want active", w)
	}
	if w := f.s.queue.Where("gpu-demo/wants-h100"); w != "unschedulable" {
		t.Errorf("wants-h100 after the delete: in %q, want unschedulable", w)
	}
	if res := f.step(); res.Pod != "gpu-demo/wants-gpu" || res.SelectedNode != "node-1" {
		t.Fatalf("retry: %s on %q: %s", res.Pod, res.SelectedNode, res.Message)
	}
	if f.cycle() != nil {
		t.Fatal("wants-h100 was retried although nothing that could help it changed")
	}

	// A heartbeat moves nothing; a new label does.
	node := f.nodeObj("node-1")
	beat := api.Clone(node)
	beat.Status.Conditions[0].LastHeartbeatTime = api.NewTime(f.clock)
	f.s.onNodeUpdate(node, beat)
	if w := f.s.queue.Where("gpu-demo/wants-h100"); w != "unschedulable" {
		t.Errorf("wants-h100 after a heartbeat: in %q, want unschedulable", w)
	}
	relabelled := api.Clone(beat)
	relabelled.Labels[api.LabelGPUProduct] = "NVIDIA-H100-80GB-HBM3"
	f.s.onNodeUpdate(beat, relabelled)
	if w := f.s.queue.Where("gpu-demo/wants-h100"); w != "active" {
		t.Errorf("wants-h100 after the node was relabelled: in %q, want active", w)
	}
}

func TestDeleteDuringBackoffGoesThroughBackoff(t *testing.T) {
	f := newFixture(t, defaultConfig(noPreemption), gpuNode("node-1", 1), gpuPod("a", 1, onNode("node-1")), gpuPod("b", 1))
	f.step()
	f.s.onPodDelete(gpuPod("a", 1, onNode("node-1"))) // at once: still backing off
	if w := f.s.queue.Where("gpu-demo/b"); w != "backoff" {
		t.Fatalf("pod in %q, want backoff", w)
	}
	f.clock = f.clock.Add(time.Second)
	f.s.queue.Flush()
	if w := f.s.queue.Where("gpu-demo/b"); w != "active" {
		t.Fatalf("after the backoff the pod is in %q", w)
	}
}

func TestNodeAffinityOnGPUProduct(t *testing.T) {
	nodes := []api.Object{
		gpuNode("a100-1", 8, labels(api.LabelGPUProduct, a100)),
		gpuNode("h100-1", 8, labels(api.LabelGPUProduct, "NVIDIA-H100-80GB-HBM3")),
		gpuNode("a100-2", 8, labels(api.LabelGPUProduct, a100)),
		gpuNode("cpu-1", 0),
	}
	var pods []api.Object
	for i := range 6 {
		pods = append(pods, gpuPod("train-"+string(rune('a'+i)), 1, func(p *api.Pod) {
			p.Spec.Affinity = &api.Affinity{NodeAffinity: &api.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &api.NodeSelector{
				NodeSelectorTerms: []api.NodeSelectorTerm{{MatchExpressions: []api.NodeSelectorRequirement{
					{Key: api.LabelGPUProduct, Operator: "In", Values: []string{"NVIDIA-GeForce-RTX-4090", a100}},
				}}},
			}}}
		}))
	}
	f := newFixture(t, config.Default(), append(nodes, pods...)...)
	used := map[string]int{}
	for range pods {
		res := f.step()
		if !strings.HasPrefix(res.SelectedNode, "a100-") {
			t.Fatalf("placed on %q:\n%s", res.SelectedNode, Explain(res))
		}
		used[res.SelectedNode]++
		for _, n := range res.Nodes {
			if strings.HasPrefix(n.Node, "a100") != n.Feasible() {
				t.Errorf("node %s feasible=%v", n.Node, n.Feasible())
			}
		}
	}
	if used["a100-1"] != 3 || used["a100-2"] != 3 {
		t.Errorf("LeastAllocated should spread: %v", used)
	}
}

func TestTaintedGPUNodeTakesOnlyTolerating(t *testing.T) {
	taint := api.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: api.TaintEffectNoSched}
	f := newFixture(t, defaultConfig(noPreemption),
		gpuNode("gpu-1", 4, func(n *api.Node) { n.Spec.Taints = []api.Taint{taint} }),
		gpuNode("cpu-1", 0),
		gpuPod("tolerates", 1, func(p *api.Pod) {
			p.Spec.Tolerations = []api.Toleration{{Key: "nvidia.com/gpu", Operator: "Exists", Effect: api.TaintEffectNoSched}}
		}),
	)
	if res := f.step(); res.SelectedNode != "gpu-1" {
		t.Fatalf("tolerating pod: %q %q", res.SelectedNode, res.Message)
	}
	f.add(gpuPod("web", 0, cpu("100m")))
	if res := f.step(); res.SelectedNode != "cpu-1" {
		t.Errorf("plain pod went to %q", res.SelectedNode)
	}
	f.add(gpuPod("plain-gpu", 1))
	want := "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint {nvidia.com/gpu: present}."
	if res := f.step(); res.SelectedNode != "" || res.Message != want {
		t.Errorf("non-tolerating GPU pod: %q %q", res.SelectedNode, res.Message)
	}
}

// Two pods back to back want the last GPU: the first is assumed before its
// binding is even written, so the second sees the GPU taken.
func TestAssumedPodPreventsDoubleBooking(t *testing.T) {
	f := newFixture(t, defaultConfig(noPreemption), gpuNode("node-1", 1), gpuPod("a", 1), gpuPod("b", 1))
	first := f.cycle() // chosen and assumed; binding not run yet
	if first.node != "node-1" || !f.s.cache.IsAssumed("gpu-demo/a") {
		t.Fatalf("first: node %q assumed %v", first.node, f.s.cache.IsAssumed("gpu-demo/a"))
	}
	second := f.cycle()
	if second.result.SelectedNode != "" || second.result.Message != "0/1 nodes are available: 1 Insufficient nvidia.com/gpu." {
		t.Fatalf("second pod double-booked the GPU: %+v", second.result)
	}
	f.finish(first)
	if f.s.cache.IsAssumed("gpu-demo/a") {
		t.Error("binding confirmed by the informer, pod still assumed")
	}
	if ni := f.s.cache.NodeInfo("node-1"); ni.Requested.Scalar[api.ResourceNvidiaGPU] != 1 || len(ni.Pods) != 1 {
		t.Errorf("node-1 counts %d GPUs, %d pods", ni.Requested.Scalar[api.ResourceNvidiaGPU], len(ni.Pods))
	}
}

func TestFailedBindRollsBack(t *testing.T) {
	f := newFixture(t, defaultConfig(noPreemption), gpuNode("node-1", 1), gpuPod("a", 1))
	fail := true
	f.c.Intercept(func(a fake.Action) error {
		if a.Subresource == "binding" && fail {
			return errors.New("etcd is on fire")
		}
		return nil
	})
	tk := f.cycle()
	if !f.s.cache.IsAssumed("gpu-demo/a") {
		t.Fatal("not assumed")
	}
	f.finish(tk)
	if f.s.cache.IsAssumed("gpu-demo/a") || len(f.s.cache.NodeInfo("node-1").Pods) != 0 {
		t.Fatal("failed binding left the pod counted on the node")
	}
	if w := f.s.queue.Where("gpu-demo/a"); w != "backoff" {
		t.Fatalf("pod in %q, want backoff", w)
	}
	if evs := f.ev.take(); len(evs) != 1 || !strings.Contains(evs[0], "Warning FailedScheduling: Binding rejected: ") {
		t.Errorf("events %q", evs)
	}
	fail = false
	f.clock = f.clock.Add(time.Second)
	f.s.queue.Flush()
	if res := f.step(); res.SelectedNode != "node-1" || f.pod("gpu-demo", "a").Spec.NodeName != "node-1" {
		t.Errorf("retry: %+v", res)
	}
}

func TestPreemptionEvictsLowerPriority(t *testing.T) {
	f := newFixture(t, config.Default(),
		gpuNode("node-1", 2),
		gpuNode("node-2", 2),
		gpuPod("batch-low", 1, onNode("node-1"), priority(1)),
		gpuPod("batch-mid", 1, onNode("node-1"), priority(5)),
		gpuPod("serve-1", 1, onNode("node-2"), priority(10)),
		gpuPod("serve-2", 1, onNode("node-2"), priority(10)),
		gpuPod("urgent", 1, priority(10)),
	)
	res := f.step()
	if res.SelectedNode != "" || res.Preemption == nil || res.Preemption.Node != "node-1" {
		t.Fatalf("preemption: %+v\n%s", res.Preemption, Explain(res))
	}
	if v := res.Preemption.Victims; len(v) != 1 || v[0].Key != "gpu-demo/batch-low" {
		t.Fatalf("victims %v, want only batch-low", v)
	}
	var deleted []string
	for _, a := range f.c.Actions() {
		if a.Verb == "delete" {
			deleted = append(deleted, a.Namespace+"/"+a.Name)
		}
	}
	if !slices.Equal(deleted, []string{"gpu-demo/batch-low"}) {
		t.Errorf("deleted %v, want only the victim", deleted)
	}
	if got := f.pod("gpu-demo", "urgent").Status.NominatedNodeName; got != "node-1" {
		t.Errorf("nominatedNodeName = %q", got)
	}
	evs := f.ev.take()
	if !slices.Contains(evs, "gpu-demo/batch-low Normal Preempted: Preempted by gpu-demo/urgent on node node-1") {
		t.Errorf("events %q", evs)
	}
	// The victim's delete event frees the GPU and moves the pod back.
	f.clock = f.clock.Add(5 * time.Second)
	f.s.onPodDelete(gpuPod("batch-low", 1, onNode("node-1"), priority(1)))
	if res := f.step(); res.SelectedNode != "node-1" {
		t.Errorf("after preemption: %q %q", res.SelectedNode, res.Message)
	}
}

func TestNominatedPodKeepsItsRoom(t *testing.T) {
	urgent := gpuPod("urgent", 1, priority(10), func(p *api.Pod) { p.Status.NominatedNodeName = "node-1" })
	f := newFixture(t, defaultConfig(noPreemption), gpuNode("node-1", 1), urgent)
	f.s.queue.TryPop() // urgent is in flight (e.g. waiting for its victims)
	f.add(gpuPod("low", 1, priority(1)))
	if res := f.step(); res.SelectedNode != "" {
		t.Errorf("lower-priority pod took the nominated room on %q", res.SelectedNode)
	}
}

func TestLeastVersusMostAllocated(t *testing.T) {
	objs := []api.Object{
		gpuNode("empty", 8),
		gpuNode("half", 8),
		gpuPod("running", 4, onNode("half")),
		gpuPod("new", 1),
	}
	for _, tt := range []struct {
		strategy v1.ScoringStrategyType
		want     string
	}{{v1.LeastAllocated, "empty"}, {v1.MostAllocated, "half"}} {
		t.Run(string(tt.strategy), func(t *testing.T) {
			cfg := defaultConfig(fitArgs(v1.ScoringStrategy{Type: tt.strategy, Resources: []v1.ResourceSpec{{Name: api.ResourceNvidiaGPU, Weight: 1}}}))
			f := newFixture(t, cfg, objs...)
			if res := f.step(); res.SelectedNode != tt.want {
				t.Errorf("selected %q, want %q\n%s", res.SelectedNode, tt.want, Explain(res))
			}
		})
	}
}

func TestExplain(t *testing.T) {
	f := newFixture(t, defaultConfig(noPreemption),
		gpuNode("cpu-1", 0),
		gpuNode("gpu-1", 2),
		gpuPod("p", 1),
	)
	res := f.step()
	out := Explain(res)
	for _, want := range []string{
		"Pod gpu-demo/p: 2 nodes, 2 looked at",
		"cpu-1  no      NodeResourcesFit  Insufficient nvidia.com/gpu",
		"gpu-1  fits",
		"gpu-1  TaintToleration                  0    100         3       300",
		"       NodeResourcesFit                 98   98          1       98",
		"       NodeResourcesBalancedAllocation  0    0           1       0",
		"       TOTAL                                                     398",
		"Selected node: gpu-1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("Explain lacks %q:\n%s", want, out)
		}
	}
	tr, err := f.c.GetTrace(f.ctx, "gpu-demo", "p")
	if err != nil {
		t.Fatal(err)
	}
	if got := api.ExplainSchedulingTrace("gpu-demo/p", tr.Spans); got != out {
		t.Errorf("ExplainTrace differs from Explain:\n%s\n---\n%s", got, out)
	}
}

// Big clusters filter in parallel and stop early; the outcome must not
// depend on goroutine timing.
func TestParallelFilterIsDeterministic(t *testing.T) {
	var nodes []*api.Node
	for i := range 400 {
		nodes = append(nodes, gpuNode(fmt.Sprintf("%s%c-%03d", strings.Repeat("n", 1+i%3), 'a'+i%26, i), i%3))
	}
	snap := NewSnapshot(nodes, nil)
	run := func(par int) *CycleResult {
		s, err := New(fake.New(), defaultConfig(func(c *config.Config) { c.Parallelism = par }), Options{Recorder: &events{}})
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.ScheduleOne(t.Context(), gpuPod("p", 2), snap)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a, b := run(1), run(16)
	if a.SelectedNode != b.SelectedNode || len(a.Nodes) != len(b.Nodes) || len(a.Scores) != len(b.Scores) {
		t.Fatalf("sequential %q/%d/%d, parallel %q/%d/%d", a.SelectedNode, len(a.Nodes), len(a.Scores), b.SelectedNode, len(b.Nodes), len(b.Scores))
	}
	for i := range a.Nodes {
		if a.Nodes[i].Node != b.Nodes[i].Node || a.Nodes[i].Plugin != b.Nodes[i].Plugin {
			t.Fatalf("node %d differs", i)
		}
	}
	if len(a.Nodes) != 400 || len(a.Scores) != 133 {
		t.Errorf("looked at %d nodes, %d feasible; want all 400 (fewer than 176 feasible), 133", len(a.Nodes), len(a.Scores))
	}
}

// parallelize calls f once for every index and returns only when every
// call has finished, whether the caller or a helper ran it. Under -race a
// helper's write read after the return without the wait would be
// reported; without it, a missed or repeated index is.
func TestParallelizeCallsEachIndexOnce(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	for _, n := range []int{0, 1, parallelThreshold - 1, parallelThreshold, parallelThreshold + 1, 257, 1000, 5000} {
		for _, par := range []int{1, 2, 16} {
			a := &algorithm{parallelism: par}
			calls := make([]int, n)
			a.parallelize(n, func(i int) { calls[i]++ })
			for i, c := range calls {
				if c != 1 {
					t.Fatalf("n=%d parallelism=%d: index %d called %d times", n, par, i, c)
				}
			}
		}
	}
}
