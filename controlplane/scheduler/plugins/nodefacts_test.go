package plugins

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// The filters answer from the facts SetNode keeps in the NodeInfo
// (framework/nodefacts.go) instead of reading the Node. On random nodes
// and pods they must give what reading the Node gave: the reference
// functions below are the filters as they were before the facts.

func refNodeReady(pod *api.Pod, node *api.Node) *framework.Status {
	taint := api.Taint{Key: api.TaintNotReady, Effect: api.TaintEffectNoSched}
	for _, c := range node.Status.Conditions {
		if c.Type != api.NodeReady {
			continue
		}
		switch c.Status {
		case api.ConditionTrue:
			return nil
		case api.ConditionFalse:
			taint.Key = api.TaintNotReady
		default:
			taint.Key = api.TaintUnreachable
		}
	}
	if TolerationsTolerateTaint(pod.Spec.Tolerations, &taint) {
		return nil
	}
	if taint.Key == api.TaintUnreachable {
		return statusUnreachable
	}
	return statusNotReady
}

func refNodeUnschedulable(pod *api.Pod, node *api.Node) *framework.Status {
	if !node.Spec.Unschedulable {
		return nil
	}
	taint := api.Taint{Key: api.TaintUnschedulable, Effect: api.TaintEffectNoSched}
	if TolerationsTolerateTaint(pod.Spec.Tolerations, &taint) {
		return nil
	}
	return statusNodeUnschedulable
}

func refTaintFilter(pod *api.Pod, node *api.Node) *framework.Status {
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if t.Effect != api.TaintEffectNoSched && t.Effect != api.TaintEffectNoExec {
			continue
		}
		if !TolerationsTolerateTaint(pod.Spec.Tolerations, t) {
			return framework.NewStatus(framework.UnschedulableAndUnresolvable, UntoleratedTaintReason(t))
		}
	}
	return nil
}

func refNodePorts(pod *api.Pod, node *framework.NodeInfo) *framework.Status {
	ports := podPorts(pod)
	if sharesNodeNetwork(node.Node) {
		return sharedPortsFit(ports.shared, node)
	}
	for _, p := range ports.host {
		if node.UsedPorts[p] > 0 {
			return framework.NewStatus(framework.Unschedulable, ReasonNodePorts)
		}
	}
	return nil
}

func randomNode(r *rand.Rand, i int) *api.Node {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	n := &api.Node{ObjectMeta: api.ObjectMeta{Name: fmt.Sprintf("n%d", i), Labels: map[string]string{}, Annotations: map[string]string{}}}
	for range r.IntN(5) {
		n.Labels[pick("zone", "gpu", "disk", api.LabelSkiffPodNetwork, api.LabelSkiffSimulated)] = pick("a", "b", "none", "true", "")
	}
	for range r.IntN(3) {
		n.Annotations[pick(api.HAMiNodeRegister, "other", "x")] = pick("", "v")
	}
	for range r.IntN(3) {
		n.Status.Conditions = append(n.Status.Conditions, api.NodeCondition{Type: pick(api.NodeReady, "MemoryPressure"),
			Status: pick(api.ConditionTrue, api.ConditionFalse, "Unknown")})
	}
	for range r.IntN(3) {
		n.Spec.Taints = append(n.Spec.Taints, api.Taint{Key: pick("k1", "k2", api.TaintNotReady), Value: pick("", "v"),
			Effect: pick(api.TaintEffectNoSched, api.TaintEffectNoExec, api.TaintEffectPrefNo)})
	}
	n.Spec.Unschedulable = r.IntN(4) == 0
	return n
}

func randomPod(r *rand.Rand, i int) *api.Pod {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	p := testPod(fmt.Sprintf("p%d", i))
	if r.IntN(2) == 0 {
		p.Spec.NodeSelector = map[string]string{}
		for range 1 + r.IntN(2) {
			p.Spec.NodeSelector[pick("zone", "gpu", "disk")] = pick("a", "b", "")
		}
	}
	for range r.IntN(3) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, api.Toleration{Key: pick("", "k1", api.TaintNotReady, api.TaintUnreachable, api.TaintUnschedulable),
			Operator: pick("Exists", "Equal"), Value: pick("", "v"), Effect: pick("", api.TaintEffectNoSched, api.TaintEffectNoExec)})
	}
	for range r.IntN(2) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, api.ContainerPort{ContainerPort: int32(80 + r.IntN(2)), HostPort: int32(r.IntN(2) * 8080)})
	}
	return p
}

func TestNodeFactsFiltersMatchNodeReads(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 26))
	ctx := context.Background()
	same := func(what string, got, want *framework.Status, pod *api.Pod, node *api.Node) {
		t.Helper()
		if got.Code() != want.Code() || fmt.Sprint(got.Reasons()) != fmt.Sprint(want.Reasons()) {
			t.Fatalf("%s: pod %+v on node %+v: got %v %q, want %v %q", what, pod.Spec, node, got.Code(), got.Reasons(), want.Code(), want.Reasons())
		}
	}
	aff := &NodeAffinity{}
	for i := range 5000 {
		node, pod := randomNode(r, i), randomPod(r, i)
		var others []*api.Pod
		if r.IntN(2) == 0 {
			others = append(others, randomPod(r, -i))
		}
		// Through SetNode (the facts) and as a literal (no facts: read on each call).
		for _, ni := range []*framework.NodeInfo{nodeInfo(node, others...), {Node: node}} {
			same("NodeReady", (&NodeReady{}).Filter(ctx, nil, pod, ni), refNodeReady(pod, node), pod, node)
			same("NodeUnschedulable", (&NodeUnschedulable{}).Filter(ctx, nil, pod, ni), refNodeUnschedulable(pod, node), pod, node)
			same("TaintToleration", (&TaintToleration{}).Filter(ctx, nil, pod, ni), refTaintFilter(pod, node), pod, node)
			want := statusNodeAffinity
			if RequiredNodeAffinityMatches(pod, node) {
				want = nil
			}
			same("NodeAffinity", aff.Filter(ctx, nil, pod, ni), want, pod, node)
			same("NodePorts", runFilter(t, &NodePorts{}, pod, ni), refNodePorts(pod, ni), pod, node)
			if got, want := hamiNodeInfo(ni), hamiNode(node); got != want {
				t.Fatalf("hamiNodeInfo = %v, hamiNode = %v for %+v", got, want, node.Annotations)
			}
		}
	}
}
