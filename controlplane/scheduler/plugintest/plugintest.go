package plugintest

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// Case is one table row: the cluster and the pod to place.
type Case struct {
	Nodes []*api.Node
	// Pods already placed: each on the node its spec.nodeName names.
	Pods []*api.Pod
	// Pod to place.
	Pod *api.Pod
}

// NodeResult is one node's verdict and score.
type NodeResult struct {
	Node string
	// Fits: every filter point of the plugin passed (true when it has none).
	Fits bool
	// Reasons: why it did not fit (the plugin's words).
	Reasons []string
	// Score is what Score returned and Normalized what NormalizeScore
	// made of it (0..100); both 0 when the plugin does not score or the
	// node did not fit.
	Score, Normalized int64
}

// Results are every node's, in the order of Case.Nodes.
type Results []NodeResult

// Best is the fitting node with the highest normalised score (ties: the
// first), "" when none fits.
func (r Results) Best() string {
	best := -1
	for i, n := range r {
		if n.Fits && (best < 0 || n.Normalized > r[best].Normalized) {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	return r[best].Node
}

// Get returns the result of a node.
func (r Results) Get(node string) NodeResult {
	for _, n := range r {
		if n.Node == node {
			return n
		}
	}
	return NodeResult{}
}

// Run runs plugin p on c. An error is an internal failure (a plugin
// returned Error, or the case is malformed), not a node that does not fit.
func Run(ctx context.Context, p framework.Plugin, c Case) (Results, error) {
	if c.Pod == nil {
		return nil, fmt.Errorf("plugintest: no pod to place")
	}
	infos := make([]*framework.NodeInfo, len(c.Nodes))
	byName := map[string]*framework.NodeInfo{}
	for i, n := range c.Nodes {
		infos[i] = framework.NewNodeInfo(n)
		byName[n.Name] = infos[i]
	}
	for _, pod := range c.Pods {
		ni, ok := byName[pod.Spec.NodeName]
		if !ok {
			return nil, fmt.Errorf("plugintest: pod %s is on node %q, not in the case", pod.Name, pod.Spec.NodeName)
		}
		ni.AddPod(framework.NewPodInfo(pod))
	}
	state := framework.NewCycleState()
	state.SetNodes(infos)
	out := make(Results, len(infos))
	for i, ni := range infos {
		out[i] = NodeResult{Node: ni.Node.Name, Fits: true}
	}
	if pf, ok := p.(framework.PreFilterPlugin); ok {
		st := pf.PreFilter(ctx, state, c.Pod)
		switch {
		case st.Code() == framework.Error:
			return nil, st.AsError()
		case st.Code() == framework.Skip:
			// its Filter has nothing to check
		case !st.IsSuccess():
			for i := range out {
				out[i].Fits, out[i].Reasons = false, st.Reasons()
			}
			return out, nil
		default:
			if err := filter(ctx, p, state, c.Pod, infos, out); err != nil {
				return nil, err
			}
		}
	} else if err := filter(ctx, p, state, c.Pod, infos, out); err != nil {
		return nil, err
	}
	return out, score(ctx, p, state, c.Pod, infos, out)
}

func filter(ctx context.Context, p framework.Plugin, state *framework.CycleState, pod *api.Pod, infos []*framework.NodeInfo, out Results) error {
	f, ok := p.(framework.FilterPlugin)
	if !ok {
		return nil
	}
	for i, ni := range infos {
		st := f.Filter(ctx, state, pod, ni)
		if st.Code() == framework.Error {
			return fmt.Errorf("filter on node %s: %w", ni.Node.Name, st.AsError())
		}
		if !st.IsSuccess() {
			out[i].Fits, out[i].Reasons = false, st.Reasons()
		}
	}
	return nil
}

func score(ctx context.Context, p framework.Plugin, state *framework.CycleState, pod *api.Pod, infos []*framework.NodeInfo, out Results) error {
	sp, ok := p.(framework.ScorePlugin)
	if !ok {
		return nil
	}
	var feasible []*framework.NodeInfo
	var idx []int
	for i, ni := range infos {
		if out[i].Fits {
			feasible, idx = append(feasible, ni), append(idx, i)
		}
	}
	if len(feasible) == 0 {
		return nil
	}
	if ps, ok := p.(framework.PreScorePlugin); ok {
		st := ps.PreScore(ctx, state, pod, feasible)
		if st.Code() == framework.Skip {
			return nil
		}
		if !st.IsSuccess() {
			return fmt.Errorf("prescore: %w", st.AsError())
		}
	}
	list := make([]framework.NodeScore, len(feasible))
	for j, ni := range feasible {
		v, st := sp.Score(ctx, state, pod, ni)
		if !st.IsSuccess() {
			return fmt.Errorf("score on node %s: %w", ni.Node.Name, st.AsError())
		}
		out[idx[j]].Score = v
		list[j] = framework.NodeScore{Name: ni.Node.Name, Score: v}
	}
	if st := sp.NormalizeScore(ctx, state, pod, list); !st.IsSuccess() {
		return fmt.Errorf("normalize: %w", st.AsError())
	}
	for j := range list {
		out[idx[j]].Normalized = min(max(list[j].Score, 0), framework.MaxNodeScore)
	}
	return nil
}

// NodeOption changes a Node.
type NodeOption func(*api.Node)

// Node is a Ready node with 8 cpu, 32Gi and 110 pods, changed by opts.
func Node(name string, opts ...NodeOption) *api.Node {
	n := &api.Node{ObjectMeta: api.ObjectMeta{Name: name, Labels: map[string]string{api.LabelHostname: name}}}
	n.Status.Allocatable = api.ResourceList{api.ResourceCPU: resource.MustParse("8"), api.ResourceMemory: resource.MustParse("32Gi"), api.ResourcePods: resource.MustParse("110")}
	n.Status.Capacity = maps.Clone(n.Status.Allocatable)
	n.Status.Conditions = []api.NodeCondition{{Type: api.NodeReady, Status: api.ConditionTrue}}
	api.SetTypeMeta(n)
	for _, o := range opts {
		o(n)
	}
	return n
}

// GPUs gives the node n nvidia.com/gpu.
func GPUs(n int64) NodeOption {
	return func(node *api.Node) {
		q := *resource.NewQuantity(n, resource.DecimalSI)
		node.Status.Allocatable[api.ResourceNvidiaGPU] = q
		node.Status.Capacity[api.ResourceNvidiaGPU] = q
	}
}

// Label sets a node label.
func Label(k, v string) NodeOption { return func(n *api.Node) { n.Labels[k] = v } }

// Annotation sets a node annotation (skiff.dev/gpu-topology, ...).
func Annotation(k, v string) NodeOption {
	return func(n *api.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[k] = v
	}
}

// PodOption changes a Pod.
type PodOption func(*api.Pod)

// Pod is a pending pod in namespace default with one container, changed
// by opts.
func Pod(name string, opts ...PodOption) *api.Pod {
	p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default", UID: "uid-" + name}}
	p.Spec.Containers = []api.Container{{Name: "c", Image: "busybox"}}
	p.Status.Phase = api.PodPending
	api.SetTypeMeta(p)
	for _, o := range opts {
		o(p)
	}
	return p
}

// OnNode places the pod (spec.nodeName).
func OnNode(node string) PodOption { return func(p *api.Pod) { p.Spec.NodeName = node } }

// GPULimit asks for n nvidia.com/gpu (limits, as the course's YAML).
func GPULimit(n int64) PodOption {
	return func(p *api.Pod) {
		if p.Spec.Containers[0].Resources.Limits == nil {
			p.Spec.Containers[0].Resources.Limits = api.ResourceList{}
		}
		p.Spec.Containers[0].Resources.Limits[api.ResourceNvidiaGPU] = *resource.NewQuantity(n, resource.DecimalSI)
	}
}

// Requests sets the container's requests: Requests("cpu", "500m", "memory", "1Gi").
func Requests(kv ...string) PodOption {
	return func(p *api.Pod) {
		if p.Spec.Containers[0].Resources.Requests == nil {
			p.Spec.Containers[0].Resources.Requests = api.ResourceList{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Spec.Containers[0].Resources.Requests[kv[i]] = resource.MustParse(kv[i+1])
		}
	}
}

// Labels sets pod labels: Labels("app", "web").
func Labels(kv ...string) PodOption {
	return func(p *api.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

// Nodes names the nodes that fit, in order (for table tests).
func (r Results) Nodes() []string {
	var out []string
	for _, n := range r {
		if n.Fits {
			out = append(out, n.Node)
		}
	}
	return slices.Clip(out)
}
