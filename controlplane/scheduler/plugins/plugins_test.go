package plugins

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	v1 "k8s.io/kube-scheduler/config/v1"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// Fixtures.

func rl(kv ...string) api.ResourceList {
	out := api.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i]] = resource.MustParse(kv[i+1])
	}
	return out
}

func testNode(name string, alloc api.ResourceList, edit ...func(*api.Node)) *api.Node {
	n := &api.Node{ObjectMeta: api.ObjectMeta{Name: name, Labels: map[string]string{api.LabelHostname: name}}}
	n.Status.Allocatable = alloc
	n.Status.Conditions = []api.NodeCondition{{Type: api.NodeReady, Status: api.ConditionTrue}}
	for _, e := range edit {
		e(n)
	}
	return n
}

func testPod(name string, edit ...func(*api.Pod)) *api.Pod {
	p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default"}}
	p.Spec.Containers = []api.Container{{Name: "c", Image: "busybox"}}
	for _, e := range edit {
		e(p)
	}
	return p
}

func requests(kv ...string) func(*api.Pod) {
	return func(p *api.Pod) { p.Spec.Containers[0].Resources.Requests = rl(kv...) }
}

func limits(kv ...string) func(*api.Pod) {
	return func(p *api.Pod) { p.Spec.Containers[0].Resources.Limits = rl(kv...) }
}

func nodeInfo(n *api.Node, pods ...*api.Pod) *framework.NodeInfo {
	ni := framework.NewNodeInfo(n)
	for _, p := range pods {
		ni.AddPod(framework.NewPodInfo(p))
	}
	return ni
}

// runFilter runs PreFilter (when the plugin has one) then Filter, as a cycle does.
func runFilter(t testing.TB, p framework.FilterPlugin, pod *api.Pod, ni *framework.NodeInfo) *framework.Status {
	t.Helper()
	state := framework.NewCycleState()
	if pf, ok := p.(framework.PreFilterPlugin); ok {
		s := pf.PreFilter(context.Background(), state, pod)
		if s.Code() == framework.Skip {
			return nil // as the framework: a skipped plugin's Filter does not run
		}
		if !s.IsSuccess() {
			t.Fatalf("PreFilter: %v", s.Message())
		}
	}
	return p.Filter(context.Background(), state, pod, ni)
}

func checkStatus(t testing.TB, got *framework.Status, code framework.Code, reasons ...string) {
	t.Helper()
	if got.Code() != code || !slices.Equal(got.Reasons(), reasons) {
		t.Errorf("status = %v %q, want %v %q", got.Code(), got.Reasons(), code, reasons)
	}
}

func TestNodeResourcesFitFilter(t *testing.T) {
	gpuNode := testNode("gpu", rl("cpu", "8", "memory", "32Gi", "pods", "110", api.ResourceNvidiaGPU, "2"))
	cpuNode := testNode("cpu", rl("cpu", "8", "memory", "32Gi", "pods", "110"))
	tiny := testNode("tiny", rl("cpu", "1", "memory", "1Gi", "pods", "1"))
	tests := []struct {
		name    string
		pod     *api.Pod
		node    *framework.NodeInfo
		code    framework.Code
		reasons []string
	}{
		{"fits", testPod("p", requests("cpu", "1", "memory", "1Gi")), nodeInfo(gpuNode), framework.Success, nil},
		{"no requests always fits", testPod("p"), nodeInfo(gpuNode), framework.Success, nil},
		{"gpu from limits fits", testPod("p", limits(api.ResourceNvidiaGPU, "2")), nodeInfo(gpuNode), framework.Success, nil},
		{"gpus taken", testPod("p", limits(api.ResourceNvidiaGPU, "1")),
			nodeInfo(gpuNode, testPod("a", limits(api.ResourceNvidiaGPU, "2"))), framework.Unschedulable, []string{"Insufficient nvidia.com/gpu"}},
		{"over-request", testPod("p", limits(api.ResourceNvidiaGPU, "3")), nodeInfo(gpuNode), framework.Unschedulable, []string{"Insufficient nvidia.com/gpu"}},
		{"node without gpus", testPod("p", limits(api.ResourceNvidiaGPU, "1")), nodeInfo(cpuNode), framework.Unschedulable, []string{"Insufficient nvidia.com/gpu"}},
		{"cpu and memory", testPod("p", requests("cpu", "2", "memory", "2Gi")), nodeInfo(tiny), framework.Unschedulable, []string{"Insufficient cpu", "Insufficient memory"}},
		{"too many pods", testPod("p"), nodeInfo(tiny, testPod("a")), framework.Unschedulable, []string{"Too many pods"}},
		{"cpu used by others", testPod("p", requests("cpu", "500m")), nodeInfo(tiny, testPod("a", requests("cpu", "600m"))), framework.Unschedulable, []string{"Too many pods", "Insufficient cpu"}},
		{"init container is the max", testPod("p", requests("cpu", "100m"), func(p *api.Pod) {
			p.Spec.InitContainers = []api.Container{{Name: "init", Resources: api.ResourceRequirements{Requests: rl("cpu", "2")}}}
		}), nodeInfo(tiny), framework.Unschedulable, []string{"Insufficient cpu"}},
		// Validation rejects these; pods that reach the scheduler anyway
		// (an old store, a direct nodeName) must not wrap around.
		{"containers adding past int64 do not wrap", hugeGPUPod("p", 2), nodeInfo(gpuNode), framework.Unschedulable, []string{"Insufficient nvidia.com/gpu"}},
		{"1e400 GPUs are not 0", testPod("p", limits(api.ResourceNvidiaGPU, "1e400")), nodeInfo(gpuNode), framework.Unschedulable, []string{"Insufficient nvidia.com/gpu"}},
		{"1e400 cpus are not 0", testPod("p", requests("cpu", "1e400")), nodeInfo(gpuNode), framework.Unschedulable, []string{"Insufficient cpu"}},
		{"a node held past int64 stays full", testPod("p", limits(api.ResourceNvidiaGPU, "1")),
			nodeInfo(gpuNode, hugeGPUPod("a", 2), hugeGPUPod("b", 1)), framework.Unschedulable, []string{"Insufficient nvidia.com/gpu"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewNodeResourcesFit(nil)
			if err != nil {
				t.Fatal(err)
			}
			checkStatus(t, runFilter(t, p, tt.pod, tt.node), tt.code, tt.reasons...)
		})
	}
}

// hugeGPUPod has n containers asking for 2^62 GPUs each.
func hugeGPUPod(name string, n int) *api.Pod {
	return testPod(name, func(p *api.Pod) {
		p.Spec.Containers = nil
		for i := range n {
			p.Spec.Containers = append(p.Spec.Containers, api.Container{Name: fmt.Sprintf("c%d", i),
				Resources: api.ResourceRequirements{Limits: rl(api.ResourceNvidiaGPU, "4611686018427387904")}})
		}
	})
}

func TestPodRequests(t *testing.T) {
	p := testPod("p", limits("cpu", "1", api.ResourceNvidiaGPU, "2"), requests("cpu", "500m"), func(p *api.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, api.Container{Name: "b", Resources: api.ResourceRequirements{Limits: rl("memory", "1Gi")}})
		p.Spec.InitContainers = []api.Container{{Name: "i", Resources: api.ResourceRequirements{Requests: rl("cpu", "2", api.ResourceNvidiaGPU, "1")}}}
	})
	req, nz := framework.PodRequests(p)
	if req.MilliCPU != 2000 || req.Memory != 1<<30 || req.Scalar[api.ResourceNvidiaGPU] != 2 {
		t.Errorf("requests = %+v, want cpu 2000m (init), memory 1Gi (limit), 2 GPUs (sum beats init)", req)
	}
	// Container b asks for no cpu: it counts 100m when scoring; container c no memory: 200Mi.
	if nz.MilliCPU != 2000 || nz.Memory != 1<<30+framework.DefaultMemoryRequest {
		t.Errorf("nonZero = %+v", nz)
	}
}

// A pod of one container: its sums are the container's, in a map of its
// own for each call.
func TestPodRequestsOneContainer(t *testing.T) {
	p := testPod("p", limits("cpu", "1", api.ResourceNvidiaGPU, "2"))
	req, nz := framework.PodRequests(p)
	if req.MilliCPU != 1000 || req.Scalar[api.ResourceNvidiaGPU] != 2 || nz.MilliCPU != 1000 || nz.Memory != framework.DefaultMemoryRequest {
		t.Fatalf("requests = %+v, nonZero = %+v: want cpu 1000m and 2 GPUs (limits), nonZero memory the default", req, nz)
	}
	req.Scalar[api.ResourceNvidiaGPU] = 7
	if again, _ := framework.PodRequests(p); again.Scalar[api.ResourceNvidiaGPU] != 2 {
		t.Fatalf("a second call's GPUs = %d: the two calls share a map", again.Scalar[api.ResourceNvidiaGPU])
	}
}

func TestNodeResourcesFitScore(t *testing.T) {
	alloc := rl("cpu", "10", "memory", "10Gi", api.ResourceNvidiaGPU, "8")
	empty := nodeInfo(testNode("empty", alloc))
	busy := nodeInfo(testNode("busy", alloc), testPod("a", requests("cpu", "5", "memory", "5Gi"), limits(api.ResourceNvidiaGPU, "6")))
	pod := testPod("p", requests("cpu", "1", "memory", "1Gi"), limits(api.ResourceNvidiaGPU, "1"))
	gpuOnly := []v1.ResourceSpec{{Name: api.ResourceNvidiaGPU, Weight: 1}}
	shape := func(pts ...int32) *v1.RequestedToCapacityRatioParam {
		r := &v1.RequestedToCapacityRatioParam{}
		for i := 0; i < len(pts); i += 2 {
			r.Shape = append(r.Shape, v1.UtilizationShapePoint{Utilization: pts[i], Score: pts[i+1]})
		}
		return r
	}
	tests := []struct {
		name        string
		strategy    v1.ScoringStrategy
		empty, busy int64
	}{
		// (10-1)/10 cpu = 90, mem 90 → 90; busy: (10-6)/10 = 40.
		{"least allocated spreads", v1.ScoringStrategy{Type: v1.LeastAllocated}, 90, 40},
		{"most allocated packs", v1.ScoringStrategy{Type: v1.MostAllocated}, 10, 60},
		// GPUs: empty 1/8 → 12, busy 7/8 → 87.
		{"most allocated on gpus", v1.ScoringStrategy{Type: v1.MostAllocated, Resources: gpuOnly}, 12, 87},
		// The docs' bin packing shape (0→0, 100→10, ×10): the same line as
		// MostAllocated; GPUs 12 and 87.
		{"requested to capacity ratio packs", v1.ScoringStrategy{Type: v1.RequestedToCapacityRatio, Resources: gpuOnly, RequestedToCapacityRatio: shape(0, 0, 100, 10)}, 12, 87},
		// Reversed (0→10, 100→0): least allocated; GPUs 7/8 free → 87, 1/8 → 12.
		{"requested to capacity ratio spreads", v1.ScoringStrategy{Type: v1.RequestedToCapacityRatio, Resources: gpuOnly, RequestedToCapacityRatio: shape(0, 10, 100, 0)}, 88, 13},
		// A knee: flat 0 up to 50%, then up to 10 at 100%: empty cpu 10%
		// and memory 10% score 0 (left out) → 0; busy 60% → 20.
		{"requested to capacity ratio knee", v1.ScoringStrategy{Type: v1.RequestedToCapacityRatio, RequestedToCapacityRatio: shape(50, 0, 100, 10)}, 0, 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewNodeResourcesFit(&v1.NodeResourcesFitArgs{ScoringStrategy: &tt.strategy})
			if err != nil {
				t.Fatal(err)
			}
			state := framework.NewCycleState()
			p.PreFilter(context.Background(), state, pod)
			e, _ := p.Score(context.Background(), state, pod, empty)
			b, _ := p.Score(context.Background(), state, pod, busy)
			if e != tt.empty || b != tt.busy {
				t.Errorf("scores empty=%d busy=%d, want %d %d", e, b, tt.empty, tt.busy)
			}
		})
	}
	t.Run("exabyte node scores without overflow", func(t *testing.T) {
		p, _ := NewNodeResourcesFit(&v1.NodeResourcesFitArgs{ScoringStrategy: &v1.ScoringStrategy{Type: v1.MostAllocated, Resources: []v1.ResourceSpec{{Name: api.ResourceMemory, Weight: 1}}}})
		big := nodeInfo(testNode("big", rl("memory", "9223372036854775807")))
		half := testPod("h", requests("memory", "4611686018427387904"))
		state := framework.NewCycleState()
		p.PreFilter(context.Background(), state, half)
		if s, _ := p.Score(context.Background(), state, half, big); s != 50 {
			t.Errorf("score = %d, want 50", s)
		}
	})
	t.Run("gpu weight ignored for cpu-only pods", func(t *testing.T) {
		p, _ := NewNodeResourcesFit(&v1.NodeResourcesFitArgs{ScoringStrategy: &v1.ScoringStrategy{Type: v1.MostAllocated, Resources: gpuOnly}})
		cpuPod := testPod("c", requests("cpu", "1"))
		state := framework.NewCycleState()
		p.PreFilter(context.Background(), state, cpuPod)
		if s, _ := p.Score(context.Background(), state, cpuPod, busy); s != 0 {
			t.Errorf("score = %d, want 0", s)
		}
	})
}

func TestNodeResourcesFitArgsValidated(t *testing.T) {
	_, err := NewNodeResourcesFit(&v1.NodeResourcesFitArgs{ScoringStrategy: &v1.ScoringStrategy{Type: "Balanced",
		Resources: []v1.ResourceSpec{{Name: "cpu", Weight: 200}}}})
	for _, want := range []string{`args.scoringStrategy.type: Unsupported value: "Balanced"`, "args.scoringStrategy.resources[0].weight: Invalid value: 200"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

func TestNodeResourcesFitIgnoredResources(t *testing.T) {
	node := nodeInfo(testNode("n", rl("cpu", "4", "memory", "4Gi", "pods", "10")))
	pod := testPod("p", limits("example.com/foo", "1", "vendor.io/bar", "1"))
	for _, tc := range []struct {
		name    string
		args    v1.NodeResourcesFitArgs
		reasons []string
	}{
		{"both checked", v1.NodeResourcesFitArgs{}, []string{"Insufficient example.com/foo", "Insufficient vendor.io/bar"}},
		{"one ignored by name", v1.NodeResourcesFitArgs{IgnoredResources: []string{"example.com/foo"}}, []string{"Insufficient vendor.io/bar"}},
		{"one ignored by group", v1.NodeResourcesFitArgs{IgnoredResourceGroups: []string{"vendor.io"}}, []string{"Insufficient example.com/foo"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewNodeResourcesFit(&tc.args)
			if err != nil {
				t.Fatal(err)
			}
			checkStatus(t, runFilter(t, p, pod, node), framework.Unschedulable, tc.reasons...)
		})
	}
}

func term(exprs ...api.NodeSelectorRequirement) api.NodeSelectorTerm {
	return api.NodeSelectorTerm{MatchExpressions: exprs}
}

func req(key, op string, values ...string) api.NodeSelectorRequirement {
	return api.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func required(terms ...api.NodeSelectorTerm) func(*api.Pod) {
	return func(p *api.Pod) {
		p.Spec.Affinity = &api.Affinity{NodeAffinity: &api.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &api.NodeSelector{NodeSelectorTerms: terms},
		}}
	}
}

func TestNodeAffinityFilter(t *testing.T) {
	a100 := testNode("a100", nil, func(n *api.Node) {
		n.Labels[api.LabelGPUProduct] = "NVIDIA-A100-SXM4-40GB"
		n.Labels["nvidia.com/gpu.count"] = "8"
	})
	fail := []string{ReasonNodeAffinity}
	tests := []struct {
		name string
		pod  *api.Pod
		ok   bool
	}{
		{"no rules", testPod("p"), true},
		{"nodeSelector match", testPod("p", func(p *api.Pod) {
			p.Spec.NodeSelector = map[string]string{api.LabelGPUProduct: "NVIDIA-A100-SXM4-40GB"}
		}), true},
		{"nodeSelector mismatch", testPod("p", func(p *api.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }), false},
		{"In", testPod("p", required(term(req(api.LabelGPUProduct, "In", "NVIDIA-GeForce-RTX-4090", "NVIDIA-A100-SXM4-40GB")))), true},
		{"In mismatch", testPod("p", required(term(req(api.LabelGPUProduct, "In", "NVIDIA-H100")))), false},
		{"NotIn", testPod("p", required(term(req(api.LabelGPUProduct, "NotIn", "NVIDIA-H100")))), true},
		{"NotIn missing label", testPod("p", required(term(req("zone", "NotIn", "a")))), true},
		{"Exists", testPod("p", required(term(req(api.LabelGPUProduct, "Exists")))), true},
		{"DoesNotExist", testPod("p", required(term(req(api.LabelGPUProduct, "DoesNotExist")))), false},
		{"Gt", testPod("p", required(term(req("nvidia.com/gpu.count", "Gt", "4")))), true},
		{"Gt equal", testPod("p", required(term(req("nvidia.com/gpu.count", "Gt", "8")))), false},
		{"Lt", testPod("p", required(term(req("nvidia.com/gpu.count", "Lt", "9")))), true},
		{"Gt not a number", testPod("p", required(term(req(api.LabelGPUProduct, "Gt", "1")))), false},
		{"terms are ORed", testPod("p", required(term(req("x", "Exists")), term(req(api.LabelGPUProduct, "Exists")))), true},
		{"expressions are ANDed", testPod("p", required(term(req("x", "Exists"), req(api.LabelGPUProduct, "Exists")))), false},
		{"empty term matches nothing", testPod("p", required(api.NodeSelectorTerm{})), false},
		{"matchFields name", testPod("p", required(api.NodeSelectorTerm{MatchFields: []api.NodeSelectorRequirement{req("metadata.name", "In", "a100")}})), true},
		{"selector and affinity both needed", testPod("p", required(term(req(api.LabelGPUProduct, "Exists"))), func(p *api.Pod) { p.Spec.NodeSelector = map[string]string{"x": "y"} }), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runFilter(t, &NodeAffinity{}, tt.pod, nodeInfo(a100))
			if tt.ok {
				checkStatus(t, got, framework.Success)
			} else {
				checkStatus(t, got, framework.UnschedulableAndUnresolvable, fail...)
			}
		})
	}
}

func TestNodeAffinityScore(t *testing.T) {
	pod := testPod("p", func(p *api.Pod) {
		p.Spec.Affinity = &api.Affinity{NodeAffinity: &api.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []api.PreferredSchedulingTerm{
			{Weight: 80, Preference: term(req("disk", "In", "ssd"))},
			{Weight: 20, Preference: term(req("zone", "In", "a"))},
		}}}
	})
	nodes := map[string]map[string]string{"both": {"disk": "ssd", "zone": "a"}, "ssd": {"disk": "ssd"}, "none": {}}
	var scores []framework.NodeScore
	for _, name := range []string{"both", "ssd", "none"} {
		n := testNode(name, nil, func(n *api.Node) { n.Labels = nodes[name] })
		s, _ := (&NodeAffinity{}).Score(context.Background(), nil, pod, nodeInfo(n))
		scores = append(scores, framework.NodeScore{Name: name, Score: s})
	}
	(&NodeAffinity{}).NormalizeScore(context.Background(), nil, pod, scores)
	want := []framework.NodeScore{{Name: "both", Score: 100}, {Name: "ssd", Score: 80}, {Name: "none", Score: 0}}
	if !slices.Equal(scores, want) {
		t.Errorf("scores = %v, want %v", scores, want)
	}
}

func tainted(taints ...api.Taint) func(*api.Node) {
	return func(n *api.Node) { n.Spec.Taints = taints }
}

func tolerate(tols ...api.Toleration) func(*api.Pod) {
	return func(p *api.Pod) { p.Spec.Tolerations = tols }
}

func TestTaintTolerationFilter(t *testing.T) {
	gpuTaint := api.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: api.TaintEffectNoSched}
	node := nodeInfo(testNode("gpu", nil, tainted(gpuTaint, api.Taint{Key: "soft", Effect: api.TaintEffectPrefNo})))
	tests := []struct {
		name string
		pod  *api.Pod
		ok   bool
	}{
		{"no toleration", testPod("p"), false},
		{"Equal", testPod("p", tolerate(api.Toleration{Key: "nvidia.com/gpu", Value: "present", Effect: api.TaintEffectNoSched})), true},
		{"Equal wrong value", testPod("p", tolerate(api.Toleration{Key: "nvidia.com/gpu", Value: "absent"})), false},
		{"Exists any effect", testPod("p", tolerate(api.Toleration{Key: "nvidia.com/gpu", Operator: "Exists"})), true},
		{"wrong effect", testPod("p", tolerate(api.Toleration{Key: "nvidia.com/gpu", Operator: "Exists", Effect: api.TaintEffectNoExec})), false},
		{"tolerate everything", testPod("p", tolerate(api.Toleration{Operator: "Exists"})), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runFilter(t, &TaintToleration{}, tt.pod, node)
			if tt.ok {
				checkStatus(t, got, framework.Success)
			} else {
				checkStatus(t, got, framework.UnschedulableAndUnresolvable, "node(s) had untolerated taint {nvidia.com/gpu: present}")
			}
		})
	}
}

func TestTaintTolerationScore(t *testing.T) {
	soft := func(k string) api.Taint { return api.Taint{Key: k, Effect: api.TaintEffectPrefNo} }
	pod := testPod("p", tolerate(api.Toleration{Key: "b", Operator: "Exists", Effect: api.TaintEffectPrefNo}))
	var scores []framework.NodeScore
	for _, n := range []*api.Node{
		testNode("clean", nil),
		testNode("one", nil, tainted(soft("a"))),
		testNode("tolerated", nil, tainted(soft("b"))),
		testNode("two", nil, tainted(soft("a"), soft("c"))),
	} {
		s, _ := (&TaintToleration{}).Score(context.Background(), nil, pod, nodeInfo(n))
		scores = append(scores, framework.NodeScore{Name: n.Name, Score: s})
	}
	(&TaintToleration{}).NormalizeScore(context.Background(), nil, pod, scores)
	want := []framework.NodeScore{{Name: "clean", Score: 100}, {Name: "one", Score: 50}, {Name: "tolerated", Score: 100}, {Name: "two", Score: 0}}
	if !slices.Equal(scores, want) {
		t.Errorf("scores = %v, want %v", scores, want)
	}
}

func TestSimpleFilters(t *testing.T) {
	ready := testNode("n1", nil)
	cordoned := testNode("n1", nil, func(n *api.Node) { n.Spec.Unschedulable = true })
	notReady := testNode("n1", nil, func(n *api.Node) { n.Status.Conditions[0].Status = api.ConditionFalse })
	unknown := testNode("n1", nil, func(n *api.Node) { n.Status.Conditions[0].Status = api.ConditionUnknown })
	fresh := testNode("n1", nil, func(n *api.Node) { n.Status.Conditions = nil })
	web := testPod("web", func(p *api.Pod) {
		p.Spec.Containers[0].Ports = []api.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
	})
	udp := testPod("udp", func(p *api.Pod) {
		p.Spec.Containers[0].Ports = []api.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: "UDP"}}
	})
	tests := []struct {
		name    string
		plugin  framework.FilterPlugin
		pod     *api.Pod
		node    *framework.NodeInfo
		code    framework.Code
		reasons []string
	}{
		{"schedulable", &NodeUnschedulable{}, testPod("p"), nodeInfo(ready), framework.Success, nil},
		{"cordoned", &NodeUnschedulable{}, testPod("p"), nodeInfo(cordoned), framework.UnschedulableAndUnresolvable, []string{"node(s) were unschedulable"}},
		{"cordoned tolerated", &NodeUnschedulable{}, testPod("p", tolerate(api.Toleration{Key: api.TaintUnschedulable, Operator: "Exists"})), nodeInfo(cordoned), framework.Success, nil},
		{"node name matches", &NodeName{}, testPod("p", func(p *api.Pod) { p.Spec.NodeName = "n1" }), nodeInfo(ready), framework.Success, nil},
		{"node name differs", &NodeName{}, testPod("p", func(p *api.Pod) { p.Spec.NodeName = "n2" }), nodeInfo(ready), framework.UnschedulableAndUnresolvable, []string{"node(s) didn't match the requested node name"}},
		{"ready", &NodeReady{}, testPod("p"), nodeInfo(ready), framework.Success, nil},
		{"not ready", &NodeReady{}, testPod("p"), nodeInfo(notReady), framework.UnschedulableAndUnresolvable, []string{"node(s) had untolerated taint {node.kubernetes.io/not-ready: }"}},
		{"unreachable", &NodeReady{}, testPod("p"), nodeInfo(unknown), framework.UnschedulableAndUnresolvable, []string{"node(s) had untolerated taint {node.kubernetes.io/unreachable: }"}},
		{"no condition yet", &NodeReady{}, testPod("p"), nodeInfo(fresh), framework.UnschedulableAndUnresolvable, []string{"node(s) had untolerated taint {node.kubernetes.io/not-ready: }"}},
		{"not ready tolerated", &NodeReady{}, testPod("p", tolerate(api.Toleration{Key: api.TaintNotReady, Operator: "Exists"})), nodeInfo(notReady), framework.Success, nil},
		{"port free", &NodePorts{}, web, nodeInfo(ready, udp), framework.Success, nil},
		{"port taken", &NodePorts{}, web, nodeInfo(ready, testPod("other", func(p *api.Pod) { p.Spec.Containers[0].Ports = web.Spec.Containers[0].Ports })), framework.Unschedulable, []string{ReasonNodePorts}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkStatus(t, runFilter(t, tt.plugin, tt.pod, tt.node), tt.code, tt.reasons...)
		})
	}
}

// TestGPUTopology: the plugin scores only GPU pods, each node by the best
// set of free GPUs its annotation offers (topoNode: 0-1 NVLinked, 2-3 PIX).
func TestGPUTopology(t *testing.T) {
	g := NewGPUTopology()
	gpuPod := testPod("p", limits(api.ResourceNvidiaGPU, "2"))
	for _, tt := range []struct {
		pod  *api.Pod
		node *api.Node
		want int64
	}{
		{gpuPod, topoNode(t, "nvlink", []int{0, 1, 2, 3}), 100},
		{gpuPod, topoNode(t, "pcie", []int{0, 2, 3}), 50},
		{gpuPod, testNode("unknown", nil), 0},
		{testPod("cpu"), topoNode(t, "nvlink", []int{0, 1, 2, 3}), 0},
	} {
		got, _ := g.Score(context.Background(), framework.NewCycleState(), tt.pod, nodeInfo(tt.node))
		if got != tt.want {
			t.Errorf("%s on %s: score %d, want %d", tt.pod.Name, tt.node.Name, got, tt.want)
		}
	}
}

func TestRegistry(t *testing.T) {
	for _, name := range Names() {
		p, err := Registry()[name](Args{Client: nil})
		if name == DefaultBinderName || name == CoschedulingName || name == DynamicResourcesName || name == VolumeBindingName || name == HAMiName {
			if err == nil {
				t.Errorf("%s without its handle: no error", name)
			}
			continue
		}
		if err != nil || p.Name() != name {
			t.Errorf("%s: %v, %v", name, p, err)
		}
	}
}

func TestBalancedAllocationScore(t *testing.T) {
	p, err := NewBalancedAllocation(nil)
	if err != nil {
		t.Fatal(err)
	}
	node := nodeInfo(testNode("n", rl("cpu", "10", "memory", "10Gi", "pods", "10")), testPod("a", requests("cpu", "4", "memory", "1Gi")))
	for _, tc := range []struct {
		name string
		pod  *api.Pod
		want int64
		skip bool
	}{
		// cpu (4+2)/10 = 0.6, memory (1+0.5)/10 = 0.15: std 0.225 → 77.
		{"cpu heavy", testPod("p", requests("cpu", "2", "memory", "512Mi")), 77, false},
		// cpu 0.5, memory (1+4)/10 = 0.5: balanced → 100.
		{"balancing", testPod("p", requests("cpu", "1", "memory", "4Gi")), 100, false},
		{"best effort is skipped", testPod("p"), 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := framework.NewCycleState()
			st := p.PreScore(context.Background(), state, tc.pod, nil)
			if (st.Code() == framework.Skip) != tc.skip {
				t.Fatalf("PreScore = %v, want skip %v", st, tc.skip)
			}
			if tc.skip {
				return
			}
			if got, _ := p.Score(context.Background(), state, tc.pod, node); got != tc.want {
				t.Errorf("score = %d, want %d", got, tc.want)
			}
		})
	}
}
