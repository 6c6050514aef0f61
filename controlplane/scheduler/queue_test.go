package scheduler

import (
	"testing"
	"time"

	"skiff.dev/skiff/api"
)

type testClock struct{ t time.Time }

func (c *testClock) now() time.Time { return c.t }

func newTestQueue() (*Queue, *testClock) {
	c := &testClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	return NewQueue(QueueOptions{PodInitialBackoff: time.Second, PodMaxBackoff: 10 * time.Second, MaxUnschedulable: DefaultMaxUnschedulable}, c.now), c
}

func popKey(t *testing.T, q *Queue) string {
	t.Helper()
	qp, err := q.TryPop()
	if err != nil {
		t.Fatal(err)
	}
	if qp == nil {
		return ""
	}
	return qp.Info.Key
}

func TestQueuePriorityThenFIFO(t *testing.T) {
	q, c := newTestQueue()
	for _, p := range []*api.Pod{gpuPod("first", 0), gpuPod("second", 0), gpuPod("vip", 0, priority(100))} {
		q.Add(p)
		c.t = c.t.Add(time.Millisecond)
	}
	for _, want := range []string{"gpu-demo/vip", "gpu-demo/first", "gpu-demo/second", ""} {
		if got := popKey(t, q); got != want {
			t.Errorf("pop %q, want %q", got, want)
		}
	}
}

func TestQueueBackoffDoubles(t *testing.T) {
	q, c := newTestQueue()
	q.Add(gpuPod("p", 1))
	for attempt, want := range []time.Duration{1, 2, 4, 8, 10, 10} {
		qp, _ := q.TryPop()
		q.AddBackoff(qp)
		c.t = c.t.Add(want*time.Second - time.Millisecond)
		q.Flush()
		if w := q.Where(qp.Info.Key); w != "backoff" {
			t.Fatalf("attempt %d: in %q before %ds", attempt+1, w, want)
		}
		c.t = c.t.Add(time.Millisecond)
		q.Flush()
		if w := q.Where(qp.Info.Key); w != "active" {
			t.Fatalf("attempt %d: in %q after %ds", attempt+1, w, want)
		}
	}
}

func TestQueueUnschedulable(t *testing.T) {
	q, c := newTestQueue()
	p := gpuPod("p", 1)
	q.Add(p)
	qp, _ := q.TryPop()
	q.AddUnschedulable(qp, false)
	if w := q.Where("gpu-demo/p"); w != "unschedulable" {
		t.Fatalf("in %q", w)
	}

	// Our own status write changes no spec: the pod stays.
	withStatus := api.Clone(p)
	withStatus.Status.Conditions = []api.PodCondition{{Type: api.PodScheduled, Status: api.ConditionFalse}}
	q.Update(p, withStatus)
	if w := q.Where("gpu-demo/p"); w != "unschedulable" {
		t.Fatalf("status-only update moved the pod to %q", w)
	}

	// A spec change may make it fit: it moves (to backoff: 1s not yet passed).
	smaller := api.Clone(withStatus)
	smaller.Spec.Containers[0].Resources.Limits = nil
	q.Update(withStatus, smaller)
	if w := q.Where("gpu-demo/p"); w != "backoff" {
		t.Fatalf("spec update: in %q", w)
	}

	// The periodic flush retries pods left alone too long.
	c.t = c.t.Add(2 * time.Second)
	q.Flush()
	qp, _ = q.TryPop()
	q.AddUnschedulable(qp, false)
	c.t = c.t.Add(DefaultMaxUnschedulable)
	q.Flush()
	if w := q.Where("gpu-demo/p"); w != "active" {
		t.Fatalf("after MaxUnschedulable: in %q", w)
	}

	q.Delete(smaller)
	if w := q.Where("gpu-demo/p"); w != "" {
		t.Fatalf("deleted pod still in %q", w)
	}
}

// A cluster event while the pod is in flight must not be lost: the pod
// goes to backoff, not to unschedulableQ.
func TestQueueMoveDuringCycle(t *testing.T) {
	q, _ := newTestQueue()
	q.Add(gpuPod("p", 1))
	qp, _ := q.TryPop()
	q.Move(ResourcesFreed) // e.g. a GPU pod deleted during the cycle
	q.AddUnschedulable(qp, false)
	if w := q.Where("gpu-demo/p"); w != "backoff" {
		t.Fatalf("in %q, want backoff", w)
	}
}

// Which unschedulable pods each cluster event moves: freed resources move
// only pods some node turned away for lack of room; a node change moves
// every pod. Nothing else (no event) moves any.
func TestQueueMoveIsSelective(t *testing.T) {
	q, c := newTestQueue()
	q.Add(gpuPod("full", 1))       // rejected for Insufficient nvidia.com/gpu
	q.Add(gpuPod("no-product", 1)) // rejected by every node's labels
	full, _ := q.TryPop()
	noProduct, _ := q.TryPop()
	q.AddUnschedulable(full, false)
	q.AddUnschedulable(noProduct, true)
	c.t = c.t.Add(2 * time.Second) // past the first backoff

	q.Move(ResourcesFreed) // a GPU pod deleted
	if w := q.Where("gpu-demo/full"); w != "active" {
		t.Errorf("after ResourcesFreed the pod that lacked a GPU is in %q, want active", w)
	}
	if w := q.Where("gpu-demo/no-product"); w != "unschedulable" {
		t.Errorf("after ResourcesFreed the pod no node's labels match is in %q, want unschedulable", w)
	}

	q.Move(NodeChanged) // a node added or relabelled
	if w := q.Where("gpu-demo/no-product"); w != "active" {
		t.Errorf("after NodeChanged the pod is in %q, want active", w)
	}
}

// An event during a cycle sends the pod to backoffQ only if it may help
// that pod: resources freed while an unresolvable pod was in flight do not.
func TestQueueMoveDuringCycleIsSelective(t *testing.T) {
	q, c := newTestQueue()
	q.Add(gpuPod("no-product", 1))
	qp, _ := q.TryPop()
	q.Move(ResourcesFreed)
	q.AddUnschedulable(qp, true)
	if w := q.Where("gpu-demo/no-product"); w != "unschedulable" {
		t.Fatalf("in %q, want unschedulable", w)
	}

	c.t = c.t.Add(2 * time.Second) // past the first backoff
	q.Move(NodeChanged)
	if qp, _ = q.TryPop(); qp == nil {
		t.Fatal("NodeChanged did not make the pod active")
	}
	q.Move(NodeChanged)
	q.AddUnschedulable(qp, true)
	if w := q.Where("gpu-demo/no-product"); w != "backoff" {
		t.Fatalf("node changed during the cycle: in %q, want backoff", w)
	}
}

func TestQueueDeleteInFlight(t *testing.T) {
	q, _ := newTestQueue()
	p := gpuPod("p", 1)
	q.Add(p)
	qp, _ := q.TryPop()
	q.Delete(p)
	q.AddUnschedulable(qp, false)
	if a, b, u := q.Len(); a+b+u != 0 || q.Where("gpu-demo/p") != "" {
		t.Fatalf("deleted in-flight pod came back: %d %d %d", a, b, u)
	}
}

func TestQueueClose(t *testing.T) {
	q, _ := newTestQueue()
	q.Close()
	q.Close()
	if _, err := q.Pop(t.Context()); err != ErrQueueClosed {
		t.Fatalf("Pop after Close: %v", err)
	}
}
