package scheduler

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/testwait"
)

// gang returns a PodGroup of minMember with a timeout in seconds.
func gang(name string, minMember, timeout int32) *api.PodGroup {
	pg := &api.PodGroup{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "gpu-demo"}}
	pg.Spec.MinMember = minMember
	pg.Spec.ScheduleTimeoutSeconds = &timeout
	api.SetTypeMeta(pg)
	return pg
}

func member(group string) func(*api.Pod) {
	return func(p *api.Pod) { p.Labels = map[string]string{api.LabelPodGroup: group} }
}

// addGroup creates a PodGroup and tells the scheduler, as its informer would.
func (f *fixture) addGroup(pg *api.PodGroup) {
	f.t.Helper()
	if _, err := f.c.Create(f.ctx, pg); err != nil {
		f.t.Fatal(err)
	}
	got, err := client.Get[*api.PodGroup](f.ctx, f.c, pg.Namespace, pg.Name)
	if err != nil {
		f.t.Fatal(err)
	}
	f.s.onPodGroupAdd(got)
}

// explain is what describe pod shows of a task's pod: its trace rendered.
func (f *fixture) explain(tk *task) string {
	f.t.Helper()
	p := tk.qp.Info.Pod
	tr, err := f.c.GetTrace(f.ctx, p.Namespace, p.Name)
	if err != nil {
		return ""
	}
	return api.ExplainSchedulingTrace(tk.qp.Info.Key, tr.Spans)
}

// addNode creates a node and tells the scheduler.
func (f *fixture) addNode(n *api.Node) {
	f.t.Helper()
	if _, err := f.c.Create(f.ctx, n); err != nil {
		f.t.Fatal(err)
	}
	f.s.onNodeAdd(f.nodeObj(n.Name))
}

// bound lists the pods of names that the API shows bound, as name@node.
func (f *fixture) bound(names ...string) []string {
	f.t.Helper()
	var out []string
	for _, n := range names {
		p, err := client.Get[*api.Pod](f.ctx, f.c, "gpu-demo", n)
		if api.IsNotFound(err) {
			continue
		}
		if err != nil {
			f.t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			out = append(out, n+"@"+p.Spec.NodeName)
		}
	}
	return out
}

// gpusHeld sums the GPUs the cache counts on the nodes (bound and assumed).
func (f *fixture) gpusHeld(nodes ...string) int64 {
	var n int64
	for _, name := range nodes {
		if ni := f.s.cache.NodeInfo(name); ni != nil {
			n += ni.Requested.Get(api.ResourceNvidiaGPU)
		}
	}
	return n
}

func TestGangOfFourWithRoomForThree(t *testing.T) {
	// Room for three one-GPU pods: two GPUs on a, one on b.
	f := newFixture(t, defaultConfig(noPreemption), gpuNode("a", 2), gpuNode("b", 1))
	f.addGroup(gang("train", 4, 600))
	names := []string{"m0", "m1", "m2", "m3"}
	partial := func(step string) {
		t.Helper()
		if b := f.bound(names...); len(b) != 0 && len(b) != 4 {
			t.Fatalf("%s: the gang runs partially: %v bound", step, b)
		}
	}

	// Three members exist: PreFilter keeps each of them out, naming the gap.
	for _, n := range names[:3] {
		f.add(gpuPod(n, 1, member("train")))
	}
	for i := 0; i < 3; i++ {
		res := f.step()
		if res == nil || res.SelectedNode != "" {
			t.Fatalf("cycle %d with 3 of 4 members: %+v", i, res)
		}
		want := fmt.Sprintf("pre-filter pod %s cannot find enough sibling pods, current pods number: 3, minMember of group: 4", strings.TrimPrefix(res.Pod, "gpu-demo/"))
		if !strings.Contains(res.Message, want) {
			t.Fatalf("message %q lacks %q", res.Message, want)
		}
		partial("prefilter")
	}
	if a, b, u := f.s.queue.Len(); a+b != 0 || u != 3 {
		t.Fatalf("queue active=%d backoff=%d unschedulable=%d, want the 3 members unschedulable", a, b, u)
	}

	// The fourth member arrives: its siblings are tried again at once.
	f.add(gpuPod("m3", 1, member("train")))
	if a, _, u := f.s.queue.Len(); a != 4 || u != 0 {
		t.Fatalf("after the 4th member: active=%d unschedulable=%d, want 4 active", a, u)
	}
	var waiting []*task
	for i := 0; i < 4; i++ {
		tk := f.cycle()
		if tk == nil {
			t.Fatalf("cycle %d: queue empty", i)
		}
		if tk.waits {
			waiting = append(waiting, tk)
		} else {
			f.finish(tk)
		}
		partial(fmt.Sprintf("cycle %d", i))
	}
	if len(waiting) != 3 || f.s.waiting.Len() != 3 {
		t.Fatalf("%d tasks wait, %d waiting pods: want 3", len(waiting), f.s.waiting.Len())
	}
	// The waiting members hold their GPUs: all three are taken.
	if got := f.gpusHeld("a", "b"); got != 3 {
		t.Fatalf("GPUs held by the waiting members: %d, want 3", got)
	}
	if got := f.bound(names...); len(got) != 0 {
		t.Fatalf("bound while waiting: %v", got)
	}

	// Room appears: a third node. The last member fits, completes the
	// quorum and releases its siblings; all four are bound.
	f.addNode(gpuNode("c", 1))
	f.clock = f.clock.Add(10 * time.Second) // past its backoff
	f.s.queue.Flush()
	last := f.cycle()
	if last == nil || last.waits || last.assumed == nil {
		t.Fatalf("the last member after room appeared: %+v", last)
	}
	partial("quorum")
	f.finish(last)
	for _, tk := range waiting {
		f.finish(tk) // allowed: WaitOnPermit returns at once
	}
	got := f.bound(names...)
	if len(got) != 4 {
		t.Fatalf("after room appeared: bound %v, want all 4", got)
	}
	perNode := map[string]int{}
	for _, b := range got {
		perNode[b[strings.Index(b, "@")+1:]]++
	}
	if perNode["a"] != 2 || perNode["b"] != 1 || perNode["c"] != 1 {
		t.Fatalf("placement %v does not fit the GPUs", got)
	}
	if f.s.waiting.Len() != 0 {
		t.Fatalf("%d pods still waiting", f.s.waiting.Len())
	}
	var waitEvents int
	for _, e := range f.ev.take() {
		if strings.Contains(e, ReasonWaitingOnPermit+": Waiting for other members of pod group gpu-demo/train") {
			waitEvents++
		}
	}
	if waitEvents != 3 {
		t.Errorf("%d WaitingOnPermit events, want 3", waitEvents)
	}
}

func TestGangTimeoutRejectsAllAndFreesRoom(t *testing.T) {
	f := newFixture(t, defaultConfig(noPreemption), gpuNode("a", 2), gpuNode("b", 1))
	f.addGroup(gang("train", 4, 1))
	names := []string{"m0", "m1", "m2", "m3"}
	for _, n := range names {
		f.add(gpuPod(n, 1, member("train")))
	}
	var waiting []*task
	for i := 0; i < 4; i++ {
		tk := f.cycle()
		if tk.waits {
			waiting = append(waiting, tk)
		} else {
			f.finish(tk)
		}
	}
	if len(waiting) != 3 || f.gpusHeld("a", "b") != 3 {
		t.Fatalf("%d waiting, %d GPUs held: want 3 and 3", len(waiting), f.gpusHeld("a", "b"))
	}
	// While it waits, describe pod (the explanation from the trace) says so.
	first := waiting[0]
	done := make(chan struct{})
	go func() { defer close(done); f.s.runTask(f.ctx, first) }()
	testwait.For(t, 5*time.Second, "the waiting member's trace shows the Permit wait", func() bool {
		return strings.Contains(f.explain(first), "Permit: waiting on node")
	})
	<-done
	f.sync(first.qp.Info.Pod)
	// Each wait ends within its 1 s timeout: the first to time out takes
	// the others with it (Unreserve).
	for _, tk := range waiting[1:] {
		f.finish(tk)
	}
	if got := f.explain(first); !strings.Contains(got, "Permit: rejected by Coscheduling: rejected due to timeout after waiting 1s at plugin Coscheduling") ||
		!strings.Contains(got, "Unschedulable: 0/1 nodes are available: 1 rejected due to timeout") {
		t.Errorf("explanation after the timeout:\n%s", got)
	}
	if got := f.bound(names...); len(got) != 0 {
		t.Fatalf("bound after the timeout: %v", got)
	}
	if got := f.gpusHeld("a", "b"); got != 0 {
		t.Fatalf("GPUs still held after the timeout: %d", got)
	}
	var timedOut, unreserved int
	for _, tk := range waiting {
		key := tk.qp.Info.Key
		if f.s.cache.IsAssumed(key) {
			t.Errorf("%s still assumed", key)
		}
		if w := f.s.queue.Where(key); w != "backoff" && w != "unschedulable" {
			t.Errorf("%s is %q in the queue, want it back to be retried", key, w)
		}
		c := f.condition(f.pod(tk.qp.Info.Pod.Namespace, tk.qp.Info.Pod.Name))
		switch c.Message {
		case "0/1 nodes are available: 1 rejected due to timeout after waiting 1s at plugin Coscheduling.":
			timedOut++
		case "0/1 nodes are available: 1 rejection in Unreserve.":
			unreserved++
		default:
			t.Errorf("%s: PodScheduled %s %q", key, c.Reason, c.Message)
		}
	}
	if timedOut < 1 || timedOut+unreserved != 3 {
		t.Errorf("%d timed out, %d rejected in Unreserve: want at least one timeout, 3 in all", timedOut, unreserved)
	}
}
