package integration

import (
	"path/filepath"
	"testing"
	"time"

	"skiff.dev/skiff/agent"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/internal/testwait"
	"skiff.dev/skiff/runtime"
	rtfake "skiff.dev/skiff/runtime/fake"
)

// An agent that stops for good: its node turns NotReady and tainted, its
// pods are deleted and come back on the other node. When it starts again,
// it removes the containers of the pods it lost and its node is untainted.
// Fake runtime, short timeouts; no containerd.
func TestNodeLostAndBack(t *testing.T) {
	dir := t.TempDir()
	cp, c := startControlPlane(t, func(cfg *controlplane.Config) {
		cfg.NodeMonitorGracePeriod, cfg.PodEvictionTimeout = time.Second, 500*time.Millisecond
	})
	runtimes := map[string]*rtfake.Runtime{"node-1": rtfake.New(rtfake.DefaultConfig()), "node-2": rtfake.New(rtfake.DefaultConfig())}
	start := func(name string) *runningAgent {
		cfg := testNodeConfig(runtimes[name], name, filepath.Join(dir, name), func(a *agent.Config) { a.HeartbeatInterval = 100 * time.Millisecond })
		cfg.RuntimeSimulated = true
		return startNode(t, cp, cfg)
	}
	nodes := map[string]*runningAgent{"node-1": start("node-1"), "node-2": start("node-2")}

	d := &api.Deployment{ObjectMeta: api.ObjectMeta{Name: "web", Namespace: "default"}}
	three := int32(3)
	d.Spec.Replicas = &three
	d.Spec.Selector = &api.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	d.Spec.Template.Labels = map[string]string{"app": "web"}
	d.Spec.Template.Spec.Containers = []api.Container{{Name: "web", Image: "nginx:1.27"}}
	if _, err := c.Create(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	pods := func() []*api.Pod {
		ps, _, err := client.List[*api.Pod](t.Context(), c, "default", api.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			t.Fatal(err)
		}
		return ps
	}
	running := func(node string) (n int) {
		for _, p := range pods() {
			if p.Status.Phase == api.PodRunning && p.DeletionTimestamp == nil && (node == "" || p.Spec.NodeName == node) {
				n++
			}
		}
		return n
	}
	testwait.For(t, 20*time.Second, "3 running pods", func() bool { return running("") == 3 })
	lost := pods()[0].Spec.NodeName
	other := map[string]string{"node-1": "node-2", "node-2": "node-1"}[lost]
	var lostUIDs []string
	for _, p := range pods() {
		if p.Spec.NodeName == lost {
			lostUIDs = append(lostUIDs, p.UID)
		}
	}

	nodes[lost].kill(t)
	testwait.For(t, 20*time.Second, "node "+lost+" to turn NotReady with the unreachable taint", func() bool {
		n, err := client.Get[*api.Node](t.Context(), c, "", lost)
		if err != nil {
			return false
		}
		tainted := false
		for _, tn := range n.Spec.Taints {
			tainted = tainted || (tn.Key == api.TaintUnreachable && tn.Effect == api.TaintEffectNoExec)
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == api.NodeReady {
				return tainted && cond.Status == api.ConditionUnknown && cond.Reason == "NodeStatusUnknown"
			}
		}
		return false
	})
	testwait.For(t, 20*time.Second, "the 3 pods to run on "+other, func() bool { return running(other) == 3 && len(pods()) == 3 })

	// The lost node comes back: it removes what it no longer owns.
	start(lost)
	testwait.For(t, 20*time.Second, "the containers of the evicted pods to be removed from "+lost, func() bool {
		for _, uid := range lostUIDs {
			cs, err := runtimes[lost].ListContainers(t.Context(), map[string]string{runtime.LabelPodUID: uid})
			if err != nil || len(cs) > 0 {
				return false
			}
		}
		return true
	})
	testwait.For(t, 20*time.Second, "node "+lost+" to be Ready and untainted", func() bool {
		n, err := client.Get[*api.Node](t.Context(), c, "", lost)
		if err != nil {
			return false
		}
		for _, tn := range n.Spec.Taints {
			if tn.Key == api.TaintUnreachable {
				return false
			}
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == api.NodeReady {
				return cond.Status == api.ConditionTrue
			}
		}
		return false
	})
}
