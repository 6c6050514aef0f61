package scheduler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/scheduler/framework"
	"skiff.dev/skiff/controlplane/scheduler/plugins"
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
	q.AddUnschedulable(qp, nil)
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
	q.AddUnschedulable(qp, nil)
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

// hintedQueue is a queue whose requeue asks the queueing hints of
// NodeResourcesFit and NodeAffinity, as a scheduler's profile would.
func hintedQueue(t *testing.T) (*Queue, *testClock) {
	q, c := newTestQueue()
	fit, err := plugins.NewNodeResourcesFit(nil)
	if err != nil {
		t.Fatal(err)
	}
	hints := framework.HintsOf(t.Context(), []framework.Plugin{fit, &plugins.NodeAffinity{}})
	q.SetRequeue(func(qp *QueuedPod, ev framework.ClusterEvent, o, n any) bool {
		return hints.Requeue(qp.Info.Pod, qp.Rejectors, ev, o, n)
	})
	return q, c
}

var (
	podDeleted  = framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}
	nodeRelabel = framework.ClusterEvent{Resource: framework.Node, ActionType: framework.UpdateNodeLabel}
)

func wantProduct(p *api.Pod) { p.Spec.NodeSelector = map[string]string{api.LabelGPUProduct: "H100"} }

// A cluster event while the pod is in flight must not be lost: the pod
// goes to backoff, not to unschedulableQ, when the event may help it.
func TestQueueMoveDuringCycle(t *testing.T) {
	q, _ := hintedQueue(t)
	q.Add(gpuPod("p", 1))
	qp, _ := q.TryPop()
	q.Move(podDeleted, gpuPod("gpu-holder", 1, onNode("n1")), nil) // a GPU pod deleted during the cycle
	q.AddUnschedulable(qp, []string{plugins.NodeResourcesFitName})
	if w := q.Where("gpu-demo/p"); w != "backoff" {
		t.Fatalf("in %q, want backoff", w)
	}
}

// Which unschedulable pods each event moves: the hints of the plugins
// that rejected them decide. A deleted GPU pod moves the pod that lacked
// a GPU, not the one no node's labels match, nor is a GPU pod moved by a
// CPU-only pod going; a relabelled node moves the pod whose selector it
// now matches.
func TestQueueMoveIsSelective(t *testing.T) {
	q, c := hintedQueue(t)
	q.Add(gpuPod("full", 1))                    // rejected for Insufficient nvidia.com/gpu
	q.Add(gpuPod("no-product", 1, wantProduct)) // rejected by every node's labels
	full, _ := q.TryPop()
	noProduct, _ := q.TryPop()
	q.AddUnschedulable(full, []string{plugins.NodeResourcesFitName})
	q.AddUnschedulable(noProduct, []string{plugins.NodeAffinityName})
	c.t = c.t.Add(2 * time.Second) // past the first backoff

	if n := q.Move(podDeleted, gpuPod("web", 0, cpu("1"), onNode("n1")), nil); n != 0 {
		t.Errorf("a CPU-only pod's deletion moved %d pods", n)
	}
	q.Move(podDeleted, gpuPod("gpu-holder", 1, onNode("n1")), nil)
	if w := q.Where("gpu-demo/full"); w != "active" {
		t.Errorf("after a GPU pod went the pod that lacked a GPU is in %q, want active", w)
	}
	if w := q.Where("gpu-demo/no-product"); w != "unschedulable" {
		t.Errorf("after a GPU pod went the pod no node's labels match is in %q, want unschedulable", w)
	}

	old := gpuNode("n1", 8)
	other := gpuNode("n1", 8, labels(api.LabelGPUProduct, "A100"))
	if n := q.Move(nodeRelabel, old, other); n != 0 {
		t.Errorf("a label the pod does not want moved %d pods", n)
	}
	q.Move(nodeRelabel, other, gpuNode("n1", 8, labels(api.LabelGPUProduct, "H100")))
	if w := q.Where("gpu-demo/no-product"); w != "active" {
		t.Errorf("after the node got the product label the pod is in %q, want active", w)
	}
}

// An event during a cycle sends the pod to backoffQ only if it may help
// that pod: a GPU freed while an unresolvable pod was in flight does not.
func TestQueueMoveDuringCycleIsSelective(t *testing.T) {
	q, c := hintedQueue(t)
	q.Add(gpuPod("no-product", 1, wantProduct))
	qp, _ := q.TryPop()
	q.Move(podDeleted, gpuPod("gpu-holder", 1, onNode("n1")), nil)
	q.AddUnschedulable(qp, []string{plugins.NodeAffinityName})
	if w := q.Where("gpu-demo/no-product"); w != "unschedulable" {
		t.Fatalf("in %q, want unschedulable", w)
	}

	c.t = c.t.Add(2 * time.Second) // past the first backoff
	h100 := gpuNode("n2", 8, labels(api.LabelGPUProduct, "H100"))
	q.Move(framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}, nil, h100)
	if qp, _ = q.TryPop(); qp == nil {
		t.Fatal("a matching node did not make the pod active")
	}
	q.Move(framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}, nil, gpuNode("n3", 8, labels(api.LabelGPUProduct, "H100")))
	q.AddUnschedulable(qp, []string{plugins.NodeAffinityName})
	if w := q.Where("gpu-demo/no-product"); w != "backoff" {
		t.Fatalf("node added during the cycle: in %q, want backoff", w)
	}
}

func TestQueueDeleteInFlight(t *testing.T) {
	q, _ := newTestQueue()
	p := gpuPod("p", 1)
	q.Add(p)
	qp, _ := q.TryPop()
	q.Delete(p)
	q.AddUnschedulable(qp, nil)
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

// A pod gated until its template claim is recorded in its status (the
// DynamicResources gate) leaves the gate on that status update, with no
// other event: the status update alone moves it.
func TestQueueGatedPodMovesOnGeneratedClaim(t *testing.T) {
	q, _ := hintedQueue(t)
	q.SetPreEnqueue(func(p *api.Pod) *framework.Status {
		if len(p.Status.ResourceClaimStatuses) == 0 {
			return framework.NewStatus(framework.UnschedulableAndUnresolvable, "ResourceClaim not created yet").WithPlugin(plugins.DynamicResourcesName)
		}
		return nil
	})
	p := gpuPod("p", 0)
	q.Add(p)
	if q.Gated("gpu-demo/p") == "" {
		t.Fatal("not gated")
	}
	withClaim := api.Clone(p)
	name := "p-gpu-abcde"
	withClaim.Status.ResourceClaimStatuses = []api.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &name}}
	q.Update(p, withClaim)
	if w := q.Where("gpu-demo/p"); w != "active" {
		t.Fatalf("after its claim was recorded the pod is in %q, want active", w)
	}
}

// A pod in backoffQ is handed out by Pop when its backoff ends, without
// waiting for a Flush (Run's one-second tick): no Flush is called here.
func TestQueuePopWakesAtBackoffExpiry(t *testing.T) {
	q := NewQueue(QueueOptions{PodInitialBackoff: 20 * time.Millisecond, PodMaxBackoff: time.Second, MaxUnschedulable: DefaultMaxUnschedulable}, nil)
	q.Add(gpuPod("p", 1))
	qp, err := q.TryPop()
	if err != nil || qp == nil {
		t.Fatalf("pop: %v %v", qp, err)
	}
	q.AddBackoff(qp)
	if w := q.Where(qp.Info.Key); w != "backoff" {
		t.Fatalf("in %q, want backoff", w)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := q.Pop(ctx)
	if err != nil {
		t.Fatalf("Pop: %v (the pod stayed in %q: backoffQ waits for Flush)", err, q.Where(qp.Info.Key))
	}
	if got.Info.Key != qp.Info.Key || got.Attempts != 2 {
		t.Errorf("popped %s attempt %d, want %s attempt 2", got.Info.Key, got.Attempts, qp.Info.Key)
	}
}

// A queue that groups its unschedulable pods by their hints (SetHintsOf,
// as the scheduler's) moves the very pods that one asking every pod does,
// over random rejectors, hints and events.
func TestQueueHintGroupsMoveTheSamePods(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 26))
	resources := []framework.EventResource{framework.AssignedPod, framework.Node, framework.ResourceClaim}
	actions := []framework.ActionType{framework.Add, framework.Delete, framework.UpdateNodeLabel}
	everyOther := func(pod *api.Pod, _, _ any) framework.QueueingHint {
		if len(pod.Name)%2 == 0 {
			return framework.Queue
		}
		return framework.QueueSkip
	}
	hints := framework.Hints{}
	for _, n := range []string{"A", "B", "C"} {
		for range 1 + r.IntN(2) {
			reg := framework.ClusterEventWithHint{Event: framework.ClusterEvent{Resource: resources[r.IntN(3)], ActionType: actions[r.IntN(3)]}}
			if r.IntN(2) == 0 {
				reg.QueueingHintFn = everyOther
			}
			hints[n] = append(hints[n], reg)
		}
	}
	requeue := func(qp *QueuedPod, ev framework.ClusterEvent, o, n any) bool {
		return hints.Requeue(qp.Info.Pod, qp.Rejectors, ev, o, n)
	}
	compiled := map[string]*framework.CompiledHints{}
	hintsOf := func(qp *QueuedPod) *framework.CompiledHints {
		k := fmt.Sprint(qp.Rejectors)
		if compiled[k] == nil {
			c := hints.Compile(qp.Rejectors)
			compiled[k] = &c
		}
		return compiled[k]
	}
	plain, c1 := newTestQueue()
	grouped, c2 := newTestQueue()
	plain.SetRequeue(requeue)
	grouped.SetRequeue(requeue)
	grouped.SetHintsOf(hintsOf)
	var keys []string
	for i := range 300 {
		// Add a pod and turn it away; every tenth round, an event.
		pod := gpuPod(fmt.Sprintf("p%d%s", i, strings.Repeat("x", r.IntN(2))), 0)
		var rejectors []string
		for range r.IntN(3) {
			rejectors = append(rejectors, []string{"A", "B", "C", "Other"}[r.IntN(4)])
		}
		for _, q := range []*Queue{plain, grouped} {
			q.Add(pod)
			qp, err := q.TryPop()
			if err != nil || qp == nil {
				t.Fatal("no pod to pop", err)
			}
			q.AddUnschedulable(qp, rejectors)
		}
		keys = append(keys, api.Key(pod.Namespace, pod.Name))
		c1.t, c2.t = c1.t.Add(time.Second), c2.t.Add(time.Second)
		if i%10 == 9 {
			ev := framework.ClusterEvent{Resource: resources[r.IntN(3)], ActionType: actions[r.IntN(3)]}
			if a, b := plain.Move(ev, nil, nil), grouped.Move(ev, nil, nil); a != b {
				t.Fatalf("event %v moved %d pods, grouped %d", ev, a, b)
			}
			for _, k := range keys {
				if a, b := plain.Where(k), grouped.Where(k); a != b {
					t.Fatalf("after %v, %s is %q, grouped %q; hints %v; rejectors %v", ev, k, a, b, hints, plain.pods[k].Rejectors)
				}
			}
			// The moved pods are tried and turned away again (by rejectors
			// that depend on the pod only, whatever order they pop in).
			for _, q := range []*Queue{plain, grouped} {
				for qp, _ := q.TryPop(); qp != nil; qp, _ = q.TryPop() {
					q.AddUnschedulable(qp, [][]string{{"B"}, {"A", "C"}, nil}[len(qp.Info.Key)%3])
				}
			}
		}
	}
}
