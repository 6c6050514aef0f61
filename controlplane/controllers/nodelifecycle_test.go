package controllers

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/membership"
)

// Node lifecycle reconciles on fixtures: a fake client holding nodes and
// pods, a clock the test moves, a member list the test edits. No sleeps.

const (
	nlGrace = 40 * time.Second
	nlEvict = 30 * time.Second
)

// readyNode is a node whose agent last posted Ready at heartbeat.
func readyNode(name string, heartbeat time.Time, taints ...api.Taint) *api.Node {
	n := &api.Node{ObjectMeta: api.ObjectMeta{Name: name, UID: "uid-" + name, CreationTimestamp: api.NewTime(t0.Add(-time.Hour))}}
	n.Spec.Taints = taints
	n.Status.Conditions = []api.NodeCondition{{Type: api.NodeReady, Status: api.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: api.NewTime(heartbeat), LastTransitionTime: api.NewTime(t0.Add(-time.Hour))}}
	return n
}

// boundPod is a running pod of a replica set, on node.
func boundPod(name, node string, opts ...podOpt) *api.Pod {
	p := pod(rsFor(deployment(1, "nginx:1"), 1, 1), name, opts...)
	p.Spec.NodeName = node
	if p.Status.Phase == "" {
		p.Status.Phase = api.PodRunning
	}
	return p
}

func tolerate(seconds *int64) podOpt {
	return func(p *api.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, api.Toleration{Key: api.TaintUnreachable, Operator: "Exists",
			Effect: api.TaintEffectNoExec, TolerationSeconds: seconds})
	}
}

// fakeMembers is a MemberSource the test edits.
type fakeMembers struct {
	mu      sync.Mutex
	list    []membership.Member
	changed chan struct{}
}

func (f *fakeMembers) Members() []membership.Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.list)
}

func (f *fakeMembers) Changed() <-chan struct{} { return f.changed }

type nlFixture struct {
	c     *fake.Client
	ev    *events
	nc    *NodeLifecycleController
	clock time.Time
}

func newNLFixture(t testing.TB, members MemberSource, objs ...api.Object) *nlFixture {
	f := &nlFixture{c: fake.New(objs...), ev: &events{}, clock: t0}
	f.c.SetClock(func() time.Time { return f.clock })
	f.nc = NewNodeLifecycleController(f.c, fakeLister{f.c, api.MustKindOf(&api.Node{})}, fakeLister{f.c, podKind()}, members, f.ev,
		NodeLifecycleConfig{GracePeriod: nlGrace, PodEvictionTimeout: nlEvict}, testLogger(t))
	f.nc.now = func() time.Time { return f.clock }
	return f
}

// reconcile runs one reconcile and returns its RequeueAfter (0 for nil).
func (f *nlFixture) reconcile(t testing.TB, node string) time.Duration {
	t.Helper()
	err := f.nc.Reconcile(t.Context(), node)
	var ra *client.RequeueAfterError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ra):
		return ra.After
	}
	t.Fatalf("reconcile %s: %v", node, err)
	return 0
}

func podNames(t testing.TB, c *fake.Client) []string {
	var names []string
	for _, p := range list[*api.Pod](t, c, "") {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names
}

func TestNodeLifecycleHealthyNodeIsLeftAlone(t *testing.T) {
	f := newNLFixture(t, nil, readyNode("n1", t0.Add(-10*time.Second)), boundPod("a", "n1"))
	after := f.reconcile(t, "n1")
	if got := writes(f.c); len(got) != 0 {
		t.Errorf("writes %v, want none", got)
	}
	// The heartbeat expires in 30 s: look again just after.
	if want := 31 * time.Second; after != want {
		t.Errorf("RequeueAfter %v, want %v", after, want)
	}
	if after := f.reconcile(t, "gone"); after != 0 {
		t.Errorf("missing node: RequeueAfter %v, want done", after)
	}
}

func TestNodeLifecycleSilentNodeIsTaintedThenEvicted(t *testing.T) {
	keep := api.Taint{Key: "gpu", Value: "a100", Effect: api.TaintEffectNoSched}
	f := newNLFixture(t, nil,
		readyNode("n1", t0.Add(-41*time.Second), keep),
		readyNode("n2", t0),
		boundPod("a", "n1"),
		boundPod("b", "n1"),
		boundPod("done", "n1", phase(api.PodSucceeded)),
		boundPod("stays", "n1", tolerate(nil)),
		boundPod("patient", "n1", tolerate(ptr[int64](60))),
		boundPod("other", "n2"),
	)

	// 41 s without a heartbeat: Ready=Unknown, tainted, nothing evicted yet.
	after := f.reconcile(t, "n1")
	n := get[*api.Node](t, f.c, "", "n1")
	c := nodeReadyCondition(n)
	if c.Status != api.ConditionUnknown || c.Reason != "NodeStatusUnknown" || c.Message != "Kubelet stopped posting node status." {
		t.Errorf("Ready condition %+v, want Unknown NodeStatusUnknown", *c)
	}
	if !c.LastTransitionTime.Equal(t0) || !c.LastHeartbeatTime.Equal(t0.Add(-41*time.Second)) {
		t.Errorf("Ready times: transition %v heartbeat %v; want now and the last heartbeat", c.LastTransitionTime, c.LastHeartbeatTime)
	}
	if hasTaint(n.Spec.Taints, api.TaintUnreachable, api.TaintEffectNoExec) == nil ||
		hasTaint(n.Spec.Taints, api.TaintUnreachable, api.TaintEffectNoSched) == nil ||
		hasTaint(n.Spec.Taints, "gpu", api.TaintEffectNoSched) == nil {
		t.Errorf("taints %+v, want unreachable NoSchedule and NoExecute beside gpu", n.Spec.Taints)
	}
	if after != nlEvict {
		t.Errorf("RequeueAfter %v, want the eviction timeout %v", after, nlEvict)
	}
	if got := f.ev.take(); len(got) != 1 || !startsWith(got[0], "Normal NodeNotReady Node n1 status is now: NodeNotReady") {
		t.Errorf("events %q, want one NodeNotReady", got)
	}
	if got := podNames(t, f.c); len(got) != 6 {
		t.Errorf("pods %v: none should be deleted before the eviction timeout", got)
	}

	// A repeat does nothing new.
	f.c.ClearActions()
	f.clock = t0.Add(10 * time.Second)
	if after := f.reconcile(t, "n1"); after != nlEvict-10*time.Second {
		t.Errorf("repeat: RequeueAfter %v, want %v", after, nlEvict-10*time.Second)
	}
	if got := writes(f.c); len(got) != 0 {
		t.Errorf("repeat wrote %v", got)
	}

	// The eviction timeout passes: a and b go, with grace 0; the finished
	// pod, the pod that tolerates the taint for good and the other node's
	// pod stay; the patient pod waits out its 60 s.
	f.clock = t0.Add(nlEvict)
	after = f.reconcile(t, "n1")
	if got, want := podNames(t, f.c), []string{"done", "other", "patient", "stays"}; !slices.Equal(got, want) {
		t.Errorf("pods left %v, want %v", got, want)
	}
	if want := 30 * time.Second; after != want {
		t.Errorf("RequeueAfter %v, want %v for the patient pod", after, want)
	}
	got := f.ev.take()
	wantEv := []string{"Normal DeletingAllPods Deleting all Pods from Node n1.",
		"Normal TaintManagerEviction Marking for deletion Pod lab/a", "Normal TaintManagerEviction Marking for deletion Pod lab/b"}
	if !slices.Equal(got, wantEv) {
		t.Errorf("events %q, want %q", got, wantEv)
	}

	f.clock = t0.Add(60 * time.Second)
	if after := f.reconcile(t, "n1"); after != 0 {
		t.Errorf("RequeueAfter %v, want none left waiting", after)
	}
	if got, want := podNames(t, f.c), []string{"done", "other", "stays"}; !slices.Equal(got, want) {
		t.Errorf("pods left %v, want %v", got, want)
	}
}

// A pod whose graceful deletion began before the node went away is
// force-deleted too: the node will never confirm it.
func TestNodeLifecycleForceDeletesTerminatingPods(t *testing.T) {
	p := boundPod("a", "n1")
	deleting := api.NewTime(t0.Add(-time.Minute))
	p.DeletionTimestamp = &deleting
	f := newNLFixture(t, nil, readyNode("n1", t0.Add(-time.Minute)), p)
	f.reconcile(t, "n1")
	f.clock = t0.Add(nlEvict)
	f.reconcile(t, "n1")
	if got := podNames(t, f.c); len(got) != 0 {
		t.Errorf("pods left %v", got)
	}
}

func TestNodeLifecycleGossip(t *testing.T) {
	cases := []struct {
		name  string
		state membership.State
		since time.Time
		down  bool
	}{
		{"dead after the last heartbeat", membership.Dead, t0.Add(-time.Second), true},
		{"left after the last heartbeat", membership.Left, t0.Add(-time.Second), true},
		{"dead before the last heartbeat: back since", membership.Dead, t0.Add(-time.Minute), false},
		{"alive", membership.Alive, t0.Add(-time.Second), false},
		{"suspect is not dead yet", membership.Suspect, t0.Add(-time.Second), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := &fakeMembers{changed: make(chan struct{}, 1), list: []membership.Member{
				{Name: "n1", State: tc.state, Since: tc.since},
				{Name: "n2", State: membership.Dead, Since: t0}, // another node's member
			}}
			f := newNLFixture(t, m, readyNode("n1", t0.Add(-5*time.Second)))
			f.reconcile(t, "n1")
			c := nodeReadyCondition(get[*api.Node](t, f.c, "", "n1"))
			if down := c.Status == api.ConditionUnknown; down != tc.down {
				t.Errorf("Ready %s, want unreachable=%v", c.Status, tc.down)
			}
		})
	}
}

func TestNodeLifecycleNodeComesBack(t *testing.T) {
	f := newNLFixture(t, nil, readyNode("n1", t0.Add(-time.Minute)))
	f.reconcile(t, "n1")
	f.ev.take()

	// The agent posts Ready again (its heartbeat rewrites the condition).
	n := get[*api.Node](t, f.c, "", "n1")
	n.Spec.Taints = append(n.Spec.Taints, api.Taint{Key: "gpu", Effect: api.TaintEffectNoSched})
	n.Status.Conditions = readyNode("n1", t0).Status.Conditions
	if _, err := f.c.Update(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	n = get[*api.Node](t, f.c, "", "n1")
	n.Status.Conditions = readyNode("n1", t0).Status.Conditions
	if _, err := f.c.UpdateStatus(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	f.reconcile(t, "n1")
	n = get[*api.Node](t, f.c, "", "n1")
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "gpu" {
		t.Errorf("taints %+v, want only gpu left", n.Spec.Taints)
	}
	if got := f.ev.take(); !slices.Equal(got, []string{"Normal NodeReady Node n1 status is now: NodeReady"}) {
		t.Errorf("events %q", got)
	}
}

// WatchMembers turns a gossip change into node keys.
func TestNodeLifecycleWatchMembers(t *testing.T) {
	m := &fakeMembers{changed: make(chan struct{}, 1), list: []membership.Member{{Name: "n1"}, {Name: "n2"}}}
	f := newNLFixture(t, m)
	keys := make(chan string, 2)
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	go func() { defer close(done); f.nc.WatchMembers(ctx, func(k string) { keys <- k }) }()
	t.Cleanup(func() { cancel(); <-done })
	m.changed <- struct{}{}
	got := []string{<-keys, <-keys}
	if !slices.Equal(got, []string{"n1", "n2"}) {
		t.Errorf("enqueued %v", got)
	}
}

func startsWith(s, prefix string) bool { return len(s) >= len(prefix) && s[:len(prefix)] == prefix }
