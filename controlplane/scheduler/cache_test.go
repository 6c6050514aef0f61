package scheduler

import (
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

func gpusOn(c *Cache, node string) int64 {
	ni := c.NodeInfo(node)
	if ni == nil {
		return -1
	}
	return ni.Requested.Scalar[api.ResourceNvidiaGPU]
}

func TestCacheAssumeLifecycle(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewCache(30 * time.Second)
	c.AddNode(gpuNode("n1", 8))
	snap := &Snapshot{}
	c.Snapshot(snap)
	before := snap.Get("n1")

	assume := func(name string) *framework.PodInfo {
		pi := framework.NewPodInfo(gpuPod(name, 2, onNode("n1")))
		if err := c.AssumePod(pi); err != nil {
			t.Fatal(err)
		}
		return pi
	}
	a := assume("a")
	if err := c.AssumePod(a); err == nil {
		t.Error("assumed twice")
	}
	if gpusOn(c, "n1") != 2 || before.Requested.Scalar[api.ResourceNvidiaGPU] != 0 {
		t.Fatalf("cache %d GPUs; an older snapshot must not change", gpusOn(c, "n1"))
	}

	// Confirmed by the informer: no longer assumed, counted once.
	c.AddPod(gpuPod("a", 2, onNode("n1")))
	if c.IsAssumed(a.Key) || gpusOn(c, "n1") != 2 {
		t.Fatalf("confirm: assumed=%v gpus=%d", c.IsAssumed(a.Key), gpusOn(c, "n1"))
	}
	c.ForgetPod(a.Key) // a confirmed pod is not forgotten
	if gpusOn(c, "n1") != 2 {
		t.Fatal("forgot a confirmed pod")
	}

	// Binding failed: forgotten.
	b := assume("b")
	c.ForgetPod(b.Key)
	if gpusOn(c, "n1") != 2 {
		t.Fatalf("forget: %d GPUs", gpusOn(c, "n1"))
	}

	// Bound but never confirmed: expires after the TTL.
	d := assume("d")
	c.FinishBinding(d.Key, now)
	if got := c.Cleanup(now.Add(29 * time.Second)); len(got) != 0 {
		t.Fatalf("expired early: %v", got)
	}
	if got := c.Cleanup(now.Add(31 * time.Second)); len(got) != 1 || got[0].Key != d.Key || gpusOn(c, "n1") != 2 {
		t.Fatalf("cleanup: %v, %d GPUs", got, gpusOn(c, "n1"))
	}

	// A finished pod frees its GPUs.
	done := gpuPod("a", 2, onNode("n1"))
	done.Status.Phase = api.PodSucceeded
	c.AddPod(done)
	if gpusOn(c, "n1") != 0 {
		t.Fatalf("finished pod still counted: %d", gpusOn(c, "n1"))
	}
}

func TestCachePodBeforeNode(t *testing.T) {
	c := NewCache(time.Minute)
	c.AddPod(gpuPod("early", 1, onNode("late")))
	snap := &Snapshot{}
	c.Snapshot(snap)
	if len(snap.Nodes()) != 0 {
		t.Fatal("a node known only from its pods is in the snapshot")
	}
	c.AddNode(gpuNode("late", 1))
	c.AddNode(gpuNode("a-first", 1))
	c.Snapshot(snap)
	if len(snap.Nodes()) != 2 || snap.Nodes()[0].Node.Name != "a-first" || snap.Get("late").Requested.Scalar[api.ResourceNvidiaGPU] != 1 {
		t.Fatalf("snapshot %v", snap.Nodes())
	}
	c.RemoveNode("late")
	c.Snapshot(snap)
	if len(snap.Nodes()) != 1 || snap.Get("late") != nil {
		t.Fatal("removed node still in the snapshot")
	}
}
