package scheduler

import (
	"context"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/controlplane/scheduler/config"
	"skiff.dev/skiff/internal/testwait"
)

// Run wires informers, the loop and the workers: a pending GPU pod gets
// bound, a second one waits, and deleting the first lets it in.
func TestRunEndToEnd(t *testing.T) {
	c := fake.New(gpuNode("node-1", 1), gpuPod("first", 1))
	s, err := New(c, config.Default(), Options{Recorder: &events{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	boundTo := func(name string) func() bool {
		return func() bool {
			p, err := client.Get[*api.Pod](ctx, c, "gpu-demo", name)
			return err == nil && p.Spec.NodeName == "node-1"
		}
	}
	testwait.For(t, 15*time.Second, "first bound", boundTo("first"))
	if _, err := c.Create(ctx, gpuPod("second", 1)); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 15*time.Second, "second unschedulable", func() bool {
		p, err := client.Get[*api.Pod](ctx, c, "gpu-demo", "second")
		return err == nil && len(p.Status.Conditions) > 0 && p.Status.Conditions[0].Reason == "Unschedulable"
	})
	// The first pod finishes: its GPU is free (a delete would do the same).
	first, _ := client.Get[*api.Pod](ctx, c, "gpu-demo", "first")
	first.Status.Phase = api.PodSucceeded
	if _, err := c.UpdateStatus(ctx, first); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 15*time.Second, "second bound after the first finished", boundTo("second"))
}

func TestHeartbeatDoesNotMovePods(t *testing.T) {
	old := gpuNode("n", 1)
	beat := api.Clone(old)
	beat.Status.Conditions[0].LastHeartbeatTime = api.Now()
	if nodeSchedulingChanged(old, beat) {
		t.Error("a heartbeat counts as a scheduling change")
	}
	cordoned := api.Clone(old)
	cordoned.Spec.Unschedulable = true
	notReady := api.Clone(old)
	notReady.Status.Conditions[0].Status = api.ConditionFalse
	for _, n := range []*api.Node{cordoned, notReady} {
		if !nodeSchedulingChanged(old, n) {
			t.Errorf("change not seen: %+v", n.Spec)
		}
	}
}
