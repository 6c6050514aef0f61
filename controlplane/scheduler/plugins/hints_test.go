package plugins

import (
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// Each plugin's queueing hints: which change requeues a pod it rejected.
func TestQueueingHints(t *testing.T) {
	fit, _ := NewNodeResourcesFit(nil)
	ipa, _ := NewInterPodAffinity(nil, nil, nil)
	spread, _ := NewPodTopologySpread(nil, nil, nil)
	gpuPod := testPod("gpu", limits(api.ResourceNvidiaGPU, "1"))
	cpuPod := testPod("cpu", requests("cpu", "1"))
	h100 := func(p *api.Pod) { p.Spec.NodeSelector = map[string]string{api.LabelGPUProduct: "H100"} }
	antiWeb := func(p *api.Pod) {
		p.Spec.Affinity = &api.Affinity{PodAntiAffinity: &api.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []api.PodAffinityTerm{{
			LabelSelector: &api.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, TopologyKey: api.LabelHostname}}}}
	}
	labelled := func(k, v string) func(*api.Pod) {
		return func(p *api.Pod) { p.Labels = map[string]string{k: v} }
	}
	spreadWeb := func(p *api.Pod) {
		p.Spec.TopologySpreadConstraints = []api.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: api.DoNotSchedule,
			LabelSelector: &api.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	}
	node := func(edit ...func(*api.Node)) *api.Node {
		return testNode("n", rl("cpu", "8", "memory", "8Gi", api.ResourceNvidiaGPU, "8"), edit...)
	}
	withLabel := func(k, v string) func(*api.Node) { return func(n *api.Node) { n.Labels[k] = v } }
	tainted := func(n *api.Node) { n.Spec.Taints = []api.Taint{{Key: "gpu", Effect: api.TaintEffectNoSched}} }

	for _, tc := range []struct {
		name   string
		plugin framework.Plugin
		pod    *api.Pod
		ev     framework.ClusterEvent
		old    any
		new    any
		want   bool
	}{
		{"fit: a GPU pod goes", fit, gpuPod, podEvent(framework.Delete), testPod("g", limits(api.ResourceNvidiaGPU, "2")), nil, true},
		{"fit: a CPU-only pod goes", fit, gpuPod, podEvent(framework.Delete), cpuPod, nil, false},
		{"fit: a node too small comes", fit, testPod("big", limits(api.ResourceNvidiaGPU, "16")), nodeEvent(framework.Add), nil, node(), false},
		{"fit: a node with room comes", fit, gpuPod, nodeEvent(framework.Add), nil, node(), true},
		{"fit: a label is no room", fit, gpuPod, nodeEvent(framework.UpdateNodeLabel), node(), node(withLabel("a", "b")), false},
		{"affinity: the wanted label", &NodeAffinity{}, testPod("p", h100), nodeEvent(framework.UpdateNodeLabel), node(), node(withLabel(api.LabelGPUProduct, "H100")), true},
		{"affinity: another label", &NodeAffinity{}, testPod("p", h100), nodeEvent(framework.UpdateNodeLabel), node(), node(withLabel(api.LabelGPUProduct, "A100")), false},
		{"taints: untainted", &TaintToleration{}, testPod("p"), nodeEvent(framework.UpdateNodeTaint), node(tainted), node(), true},
		{"taints: still tainted", &TaintToleration{}, testPod("p"), nodeEvent(framework.UpdateNodeTaint), node(), node(tainted), false},
		{"anti-affinity: the repelling pod goes", ipa, testPod("p", antiWeb), podEvent(framework.Delete), testPod("w", labelled("app", "web")), nil, true},
		{"anti-affinity: another pod goes", ipa, testPod("p", antiWeb), podEvent(framework.Delete), testPod("d", labelled("app", "db")), nil, false},
		{"existing anti-affinity: its owner goes", ipa, testPod("p", labelled("app", "web")), podEvent(framework.Delete), testPod("x", antiWeb), nil, true},
		{"spread: a counted pod comes", spread, testPod("p", spreadWeb), podEvent(framework.Add), nil, testPod("w", labelled("app", "web")), true},
		{"spread: another pod comes", spread, testPod("p", spreadWeb), podEvent(framework.Add), nil, testPod("d", labelled("app", "db")), false},
		{"spread: a pod of another namespace", spread, testPod("p", spreadWeb), podEvent(framework.Add), nil, testPod("w", labelled("app", "web"), func(p *api.Pod) { p.Namespace = "other" }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := framework.HintsOf(t.Context(), []framework.Plugin{tc.plugin})
			if got := h.Requeue(tc.pod, []string{tc.plugin.Name()}, tc.ev, tc.old, tc.new); got != tc.want {
				t.Errorf("requeue = %v, want %v", got, tc.want)
			}
		})
	}
}

func podEvent(a framework.ActionType) framework.ClusterEvent {
	return framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: a}
}

func nodeEvent(a framework.ActionType) framework.ClusterEvent {
	return framework.ClusterEvent{Resource: framework.Node, ActionType: a}
}
