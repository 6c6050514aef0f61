package simnodes_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/controlplane/simnodes"
	"skiff.dev/skiff/internal/testwait"
)

// startCluster runs a control plane (scheduler included) with n simulated nodes.
func startCluster(t testing.TB, n int) (client.Interface, *simnodes.Sim) {
	t.Helper()
	cfg := controlplane.DefaultConfig(t.TempDir())
	cfg.API.Listen = "127.0.0.1:0"
	cfg.Store.NoSync = true
	cp, err := controlplane.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	scfg := simnodes.DefaultConfig()
	scfg.Count = n
	sim, err := simnodes.New(scfg, cp.Local())
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Stop)
	return cp.Local(), sim
}

func TestSimNodes(t *testing.T) {
	c, sim := startCluster(t, 20)
	ctx := t.Context()

	nodes, _, err := client.List[*api.Node](ctx, c, "", api.ListOptions{LabelSelector: simnodes.LabelSimulated + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 20 || len(sim.Names()) != 20 {
		t.Fatalf("%d nodes, want 20", len(nodes))
	}
	for _, n := range nodes {
		ready := false
		for _, c := range n.Status.Conditions {
			ready = ready || c.Type == api.NodeReady && c.Status == api.ConditionTrue
		}
		gpus := n.Status.Allocatable[api.ResourceNvidiaGPU]
		if !ready || gpus.Value() != 8 || n.Labels[api.LabelGPUProduct] != "NVIDIA-A100-SXM4-40GB" || n.Labels[api.LabelHostname] != n.Name {
			t.Fatalf("node %s: ready %v, gpus %v, labels %v", n.Name, ready, gpus.String(), n.Labels)
		}
	}

	// GPU pods are scheduled onto the simulated nodes and turn Running.
	for i := range 10 {
		p := &api.Pod{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: "train-" + string(rune('a'+i))},
			Spec: api.PodSpec{Containers: []api.Container{{Name: "main", Image: "pytorch",
				Resources: api.ResourceRequirements{Limits: api.ResourceList{api.ResourceNvidiaGPU: resource.MustParse("4")}}}}}}
		if _, err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	running := func() []*api.Pod {
		pods, _, err := client.List[*api.Pod](ctx, c, "default", api.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []*api.Pod
		for _, p := range pods {
			if p.Status.Phase == api.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready {
				out = append(out, p)
			}
		}
		return out
	}
	testwait.For(t, 20*time.Second, "10 pods Running", func() bool { return len(running()) == 10 })

	// A graceful delete completes: the simulated node removes the pod.
	victim := running()[0]
	if err := c.Delete(ctx, api.MustKindOf(victim), "default", victim.Name, api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "deleted pod gone", func() bool {
		_, err := client.Get[*api.Pod](ctx, c, "default", victim.Name)
		return api.IsNotFound(err)
	})
}

func TestConfigValidate(t *testing.T) {
	cfg := simnodes.DefaultConfig()
	cfg.Count, cfg.CPU, cfg.Writers = -1, "lots", 0
	err := cfg.Validate()
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{"count -1", `cpu "lots"`, "writers"} {
		if !contains(err.Error(), want) {
			t.Errorf("%v lacks %q", err, want)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// A heartbeat writes over the node as its last write returned it; when
// someone else changed the node since (here a label), the write conflicts
// and the heartbeat reads the node again: the label stays, and the
// heartbeat still lands.
func TestHeartbeatKeepsOthersChanges(t *testing.T) {
	cfg := controlplane.DefaultConfig(t.TempDir())
	cfg.API.Listen = "127.0.0.1:0"
	cfg.Store.NoSync = true
	cp, err := controlplane.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	c, ctx := cp.Local(), t.Context()
	scfg := simnodes.DefaultConfig()
	scfg.Count, scfg.HeartbeatInterval = 2, 50*time.Millisecond
	sim, err := simnodes.New(scfg, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Stop)
	name := sim.Names()[0]
	heartbeat := func() time.Time {
		n, err := client.Get[*api.Node](ctx, c, "", name)
		if err != nil {
			t.Fatal(err)
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == api.NodeReady {
				return cond.LastHeartbeatTime.Time
			}
		}
		return time.Time{}
	}
	for attempt := 0; ; attempt++ { // a heartbeat may come in between: read and write again
		n, err := client.Get[*api.Node](ctx, c, "", name)
		if err != nil {
			t.Fatal(err)
		}
		n.Labels["room"] = "b"
		if _, err = c.Update(ctx, n); err == nil {
			break
		} else if !api.IsConflict(err) || attempt == 50 {
			t.Fatal(err)
		}
	}
	before := heartbeat()
	testwait.For(t, 10*time.Second, "a heartbeat after the label change", func() bool { return heartbeat().After(before) })
	got, err := client.Get[*api.Node](ctx, c, "", name)
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["room"] != "b" {
		t.Fatalf("labels after the heartbeat: %v, want room=b kept", got.Labels)
	}
}
