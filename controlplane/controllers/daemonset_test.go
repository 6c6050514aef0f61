package controllers

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
)

// DaemonSet controller tests: nodes and a DaemonSet in the fake, the
// controller reconciled by hand; the test plays the scheduler and the
// nodes (bind, run, ready) on the pods the controller made.

type dsFixture struct {
	t   *testing.T
	c   *fake.Client
	ev  *events
	dc  *DaemonSetController
	key string
	clk time.Time
}

type nodeOpt func(*api.Node)

func labelled(kv ...string) nodeOpt {
	return func(n *api.Node) {
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

func tainted(key, value, effect string) nodeOpt {
	return func(n *api.Node) {
		n.Spec.Taints = append(n.Spec.Taints, api.Taint{Key: key, Value: value, Effect: effect})
	}
}

func cordoned(n *api.Node) { n.Spec.Unschedulable = true }

func newNode(name string, opts ...nodeOpt) *api.Node {
	n := &api.Node{ObjectMeta: api.ObjectMeta{Name: name, Labels: map[string]string{api.LabelHostname: name}}}
	n.Status.Conditions = []api.NodeCondition{{Type: api.NodeReady, Status: api.ConditionTrue}}
	for _, o := range opts {
		o(n)
	}
	return n
}

type dsOpt func(*api.DaemonSet)

func newDaemonSet(name string, opts ...dsOpt) *api.DaemonSet {
	ds := &api.DaemonSet{
		ObjectMeta: api.ObjectMeta{Name: name, Namespace: ns},
		Spec: api.DaemonSetSpec{
			Selector: &api.LabelSelector{MatchLabels: map[string]string{"name": name}},
			Template: api.PodTemplateSpec{
				ObjectMeta: api.ObjectMeta{Labels: map[string]string{"name": name}},
				Spec:       api.PodSpec{Containers: []api.Container{{Name: "agent", Image: "agent:1"}}},
			},
		},
	}
	for _, o := range opts {
		o(ds)
	}
	return ds
}

func selecting(k, v string) dsOpt {
	return func(ds *api.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = map[string]string{k: v} }
}

func surge(maxSurge, maxUnavailable string) dsOpt {
	return func(ds *api.DaemonSet) {
		ds.Spec.UpdateStrategy.RollingUpdate = &api.RollingUpdateDaemonSet{MaxSurge: intOrPercent(maxSurge), MaxUnavailable: intOrPercent(maxUnavailable)}
	}
}

func newDSFixture(t *testing.T, ds *api.DaemonSet, nodes ...*api.Node) *dsFixture {
	t.Helper()
	c := fake.New()
	c.StopPodsAtOnce(false) // the test plays the nodes (gone)
	for _, n := range nodes {
		if _, err := c.Create(t.Context(), n); err != nil {
			t.Fatalf("create node: %v", err)
		}
	}
	api.SetDefaults(ds)
	api.PrepareDaemonSet(ds, nil)
	if _, err := c.Create(t.Context(), ds); err != nil {
		t.Fatalf("create daemon set: %v", err)
	}
	f := &dsFixture{t: t, c: c, ev: &events{}, key: api.KeyOf(ds), clk: t0}
	c.SetClock(func() time.Time { return f.clk })
	f.dc = NewDaemonSetController(c, fakeLister{c, daemonSetKind()}, fakeLister{c, controllerRevisionKind()},
		fakeLister{c, podKind()}, fakeLister{c, api.MustKindOf(&api.Node{})}, f.ev, testLogger(t))
	f.dc.now = func() time.Time { return f.clk }
	return f
}

func (f *dsFixture) reconcile() {
	f.t.Helper()
	err := f.dc.Reconcile(f.t.Context(), f.key)
	var ra *client.RequeueAfterError
	if err != nil && !errors.As(err, &ra) {
		f.t.Fatalf("reconcile: %v", err)
	}
}

func (f *dsFixture) ds() *api.DaemonSet {
	ns, name := client.SplitKey(f.key)
	return get[*api.DaemonSet](f.t, f.c, ns, name)
}

// change edits the stored DaemonSet as an update by a user would (the
// strategy's template generation included).
func (f *dsFixture) change(edit func(*api.DaemonSet)) {
	f.t.Helper()
	old := f.ds()
	ds := api.Clone(old)
	edit(ds)
	api.SetDefaults(ds)
	api.PrepareDaemonSet(ds, old)
	if _, err := f.c.Update(f.t.Context(), ds); err != nil {
		f.t.Fatalf("update daemon set: %v", err)
	}
}

// live is the pods not being deleted, by name.
func (f *dsFixture) live() []*api.Pod {
	ps := slices.DeleteFunc(list[*api.Pod](f.t, f.c, ns), func(p *api.Pod) bool { return p.DeletionTimestamp != nil })
	slices.SortFunc(ps, func(a, b *api.Pod) int { return strings.Compare(TargetNode(a)+a.Name, TargetNode(b)+b.Name) })
	return ps
}

// nodesOf is the target node of each live pod, sorted.
func (f *dsFixture) nodesOf() []string {
	var out []string
	for _, p := range f.live() {
		out = append(out, TargetNode(p))
	}
	slices.Sort(out)
	return out
}

// runAll plays scheduler and node: every live pod is bound to its target
// node, Running and Ready (since clk).
func (f *dsFixture) runAll() {
	f.t.Helper()
	for _, p := range f.live() {
		if p.Spec.NodeName == "" {
			if err := f.c.Bind(f.t.Context(), &api.Binding{ObjectMeta: api.ObjectMeta{Name: p.Name, Namespace: p.Namespace}, Target: api.ObjectReference{Kind: "Node", Name: TargetNode(p)}}); err != nil {
				f.t.Fatalf("bind %s: %v", p.Name, err)
			}
		}
		u := get[*api.Pod](f.t, f.c, ns, p.Name)
		if isPodReady(u) {
			continue
		}
		u.Status.Phase = api.PodRunning
		u.Status.Conditions = []api.PodCondition{{Type: api.PodReady, Status: api.ConditionTrue, LastTransitionTime: api.NewTime(f.clk)}}
		if _, err := f.c.UpdateStatus(f.t.Context(), u); err != nil {
			f.t.Fatalf("run %s: %v", p.Name, err)
		}
	}
}

// gone removes pods being deleted, as their nodes would.
func (f *dsFixture) gone() {
	f.t.Helper()
	for _, p := range list[*api.Pod](f.t, f.c, ns) {
		if p.DeletionTimestamp != nil {
			if err := f.c.Delete(f.t.Context(), podKind(), ns, p.Name, api.DeleteOptions{GracePeriodSeconds: ptr[int64](0)}); err != nil && !api.IsNotFound(err) {
				f.t.Fatal(err)
			}
		}
	}
}

func (f *dsFixture) revisions() []*api.ControllerRevision {
	revs := list[*api.ControllerRevision](f.t, f.c, ns)
	sortRevisions(revs)
	return revs
}

func TestDaemonSetOnePodPerEligibleNode(t *testing.T) {
	f := newDSFixture(t, newDaemonSet("plugin", selecting("gpu", "true")),
		newNode("gpu-1", labelled("gpu", "true")),
		newNode("gpu-2", labelled("gpu", "true"), tainted("nvidia.com/gpu", "", api.TaintEffectNoSched)),
		newNode("cpu-1"),
		newNode("gpu-3", labelled("gpu", "true"), cordoned, tainted(api.TaintUnschedulable, "", api.TaintEffectNoSched), tainted(api.TaintNotReady, "", api.TaintEffectNoExec)),
	)
	f.reconcile()
	// gpu-2's taint is not tolerated; cpu-1 lacks the label; the cordoned,
	// not-ready gpu-3 is tolerated by the controller's own tolerations.
	if got, want := f.nodesOf(), []string{"gpu-1", "gpu-3"}; !slices.Equal(got, want) {
		t.Fatalf("pods for nodes %v, want %v", got, want)
	}
	revs := f.revisions()
	if len(revs) != 1 || revs[0].Revision != 1 || !api.IsControlledBy(revs[0], f.ds().UID) {
		t.Fatalf("revisions %+v, want one, revision 1, owned by the daemon set", revs)
	}
	hash := revs[0].Labels[api.LabelControllerRevisionHash]
	if revs[0].Name != "plugin-"+hash {
		t.Errorf("revision name %s, want plugin-%s", revs[0].Name, hash)
	}
	p := f.live()[0]
	if !strings.HasPrefix(p.Name, "plugin-") || p.Spec.NodeName != "" {
		t.Errorf("pod %s bound to %q: want plugin-XXXXX left to the scheduler", p.Name, p.Spec.NodeName)
	}
	req := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(req) != 1 || len(req[0].MatchFields) != 1 || req[0].MatchFields[0].Key != "metadata.name" || req[0].MatchFields[0].Values[0] != "gpu-1" {
		t.Errorf("node affinity %+v, want matchFields metadata.name In [gpu-1]", req)
	}
	if p.Labels[api.LabelControllerRevisionHash] != hash || p.Labels[api.LabelPodTemplateGeneration] != "1" || p.Labels["name"] != "plugin" {
		t.Errorf("pod labels %v", p.Labels)
	}
	var keys []string
	for _, tol := range p.Spec.Tolerations {
		keys = append(keys, tol.Key+":"+tol.Effect)
	}
	for _, want := range []string{"node.kubernetes.io/not-ready:NoExecute", "node.kubernetes.io/unreachable:NoExecute",
		"node.kubernetes.io/disk-pressure:NoSchedule", "node.kubernetes.io/memory-pressure:NoSchedule",
		"node.kubernetes.io/pid-pressure:NoSchedule", "node.kubernetes.io/unschedulable:NoSchedule"} {
		if !slices.Contains(keys, want) {
			t.Errorf("tolerations %v lack %s", keys, want)
		}
	}
	if slices.Contains(keys, api.TaintNetworkUnavailable+":NoSchedule") {
		t.Errorf("network-unavailable tolerated without hostNetwork: %v", keys)
	}
	evs := f.ev.take()
	if len(evs) != 2 || !strings.HasPrefix(evs[0], "Normal SuccessfulCreate Created pod: plugin-") {
		t.Errorf("events %q", evs)
	}

	// The cache has not caught up yet in a real cluster; here it has, and
	// a second reconcile creates nothing more.
	f.reconcile()
	if n := len(f.live()); n != 2 {
		t.Fatalf("%d pods after a second reconcile, want 2", n)
	}
	st := f.ds().Status
	if st.DesiredNumberScheduled != 2 || st.CurrentNumberScheduled != 2 || st.NumberReady != 0 || st.UpdatedNumberScheduled != 2 || st.NumberUnavailable != 2 || st.ObservedGeneration != 1 {
		t.Errorf("status %+v", st)
	}
	f.runAll()
	f.reconcile()
	st = f.ds().Status
	if st.NumberReady != 2 || st.NumberAvailable != 2 || st.NumberUnavailable != 0 {
		t.Errorf("status after the pods run %+v", st)
	}
}

func TestDaemonSetNodesComeAndGo(t *testing.T) {
	f := newDSFixture(t, newDaemonSet("agent"), newNode("n1"))
	f.reconcile()
	f.runAll()
	// A new node gets its pod.
	if _, err := f.c.Create(t.Context(), newNode("n2")); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	if got := f.nodesOf(); !slices.Equal(got, []string{"n1", "n2"}) {
		t.Fatalf("pods for %v, want n1 and n2", got)
	}
	// An untolerated NoSchedule taint keeps the running pod; NoExecute evicts it.
	n1 := get[*api.Node](t, f.c, "", "n1")
	n1.Spec.Taints = []api.Taint{{Key: "maintenance", Effect: api.TaintEffectNoSched}}
	if _, err := f.c.Update(t.Context(), n1); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	if got := f.nodesOf(); !slices.Equal(got, []string{"n1", "n2"}) {
		t.Fatalf("after a NoSchedule taint: pods for %v, want both kept", got)
	}
	if st := f.ds().Status; st.DesiredNumberScheduled != 1 || st.NumberMisscheduled != 1 {
		t.Errorf("status %+v, want 1 desired and 1 misscheduled", st)
	}
	n1 = get[*api.Node](t, f.c, "", "n1")
	n1.Spec.Taints = []api.Taint{{Key: "maintenance", Effect: api.TaintEffectNoExec}}
	if _, err := f.c.Update(t.Context(), n1); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	if got := f.nodesOf(); !slices.Equal(got, []string{"n2"}) {
		t.Fatalf("after a NoExecute taint: pods for %v, want only n2", got)
	}
	// A pod made for a node that was deleted before it was scheduled goes.
	if err := f.c.Delete(t.Context(), api.MustKindOf(&api.Node{}), "", "n2", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	orphan := newDaemonPod(f.ds(), "x", "n2")
	if _, err := f.c.Create(t.Context(), orphan); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	for _, p := range f.live() {
		if p.Name == orphan.Name {
			t.Errorf("unscheduled pod %s for a deleted node kept", p.Name)
		}
	}
}

func TestDaemonSetFailedPodReplacedWithBackoff(t *testing.T) {
	f := newDSFixture(t, newDaemonSet("agent"), newNode("n1"))
	f.reconcile()
	f.runAll()
	f.ev.take()
	fail := func() string {
		p := f.live()[0]
		p.Status.Phase = api.PodFailed
		if _, err := f.c.UpdateStatus(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		return p.Name
	}
	first := fail()
	f.reconcile()
	evs := f.ev.take()
	if len(evs) < 1 || evs[0] != "Warning FailedDaemonPod Found failed daemon pod lab/"+first+" on node n1, will try to kill it" {
		t.Fatalf("events %q", evs)
	}
	f.gone()
	f.reconcile() // a new pod for n1
	f.runAll()
	second := fail()
	f.reconcile() // within the 1 s backoff: kept
	if live := f.live(); len(live) != 1 || live[0].Name != second {
		t.Fatalf("failed pod deleted within its backoff: %v", live)
	}
	f.clk = f.clk.Add(2 * time.Second)
	f.reconcile()
	if live := f.live(); len(live) != 0 {
		t.Fatalf("failed pod %s kept after its backoff", live[0].Name)
	}
}

func TestDaemonSetRollingUpdateMaxUnavailable(t *testing.T) {
	f := newDSFixture(t, newDaemonSet("agent"), newNode("n1"), newNode("n2"), newNode("n3"))
	f.reconcile()
	f.runAll()
	f.reconcile()
	old := f.revisions()[0].Labels[api.LabelControllerRevisionHash]
	f.change(func(ds *api.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = "agent:2" })
	if g := f.ds().Annotations[api.AnnotationDeprecatedTemplateGeneration]; g != "2" {
		t.Fatalf("template generation %q, want 2", g)
	}
	// Each step: one old pod deleted (maxUnavailable 1), then once it is
	// gone a new one made, and only when that one is ready the next.
	for step := range 3 {
		f.reconcile()
		var deleting int
		for _, p := range list[*api.Pod](t, f.c, ns) {
			if p.DeletionTimestamp != nil {
				deleting++
			}
		}
		if deleting != 1 {
			t.Fatalf("step %d: %d pods deleting, want 1", step, deleting)
		}
		f.reconcile() // nothing more while one node is unavailable
		f.gone()
		f.reconcile() // the replacement
		if n := len(f.live()); n != 3 {
			t.Fatalf("step %d: %d live pods, want 3", step, n)
		}
		f.runAll()
	}
	f.reconcile()
	revs := f.revisions()
	if len(revs) != 2 || revs[1].Revision != 2 {
		t.Fatalf("revisions %v", revs)
	}
	cur := revs[1].Labels[api.LabelControllerRevisionHash]
	for _, p := range f.live() {
		if p.Labels[api.LabelControllerRevisionHash] != cur || p.Spec.Containers[0].Image != "agent:2" {
			t.Errorf("pod %s still at %s/%s after the rollout", p.Name, p.Labels[api.LabelControllerRevisionHash], p.Spec.Containers[0].Image)
		}
	}
	if st := f.ds().Status; st.UpdatedNumberScheduled != 3 || st.NumberAvailable != 3 || st.ObservedGeneration != 2 {
		t.Errorf("status %+v", st)
	}

	// Undo: the old template back renumbers its revision to 3; no new revision.
	f.change(func(ds *api.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = "agent:1" })
	f.reconcile()
	revs = f.revisions()
	if len(revs) != 2 || revs[1].Labels[api.LabelControllerRevisionHash] != old || revs[1].Revision != 3 {
		t.Fatalf("after undo: revisions %v %v, want the first renumbered to 3", revs[0].Revision, revs[1].Revision)
	}
}

func TestDaemonSetRollingUpdateSurge(t *testing.T) {
	f := newDSFixture(t, newDaemonSet("agent", surge("1", "0")), newNode("n1"), newNode("n2"))
	f.reconcile()
	f.runAll()
	f.reconcile()
	f.change(func(ds *api.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = "agent:2" })
	f.reconcile()
	// One node gets its new pod beside the old one; nothing is deleted.
	if got := f.nodesOf(); len(got) != 3 {
		t.Fatalf("pods for %v, want a surge pod on one node (3 pods)", got)
	}
	f.reconcile()
	if got := f.nodesOf(); len(got) != 3 {
		t.Fatalf("pods for %v: a second surge before the first is available", got)
	}
	f.runAll()
	f.reconcile() // the new one is available: the old one goes
	f.gone()
	if got := f.nodesOf(); len(got) != 2 {
		t.Fatalf("pods for %v, want 2 once the old one is gone", got)
	}
	f.reconcile() // surge on the second node
	f.runAll()
	f.reconcile()
	f.gone()
	f.reconcile()
	cur := f.revisions()[1].Labels[api.LabelControllerRevisionHash]
	live := f.live()
	if len(live) != 2 || live[0].Labels[api.LabelControllerRevisionHash] != cur || live[1].Labels[api.LabelControllerRevisionHash] != cur {
		t.Fatalf("after the surge rollout: %d pods, want 2 of the new revision", len(live))
	}
}

func TestDaemonSetOnDeleteAndHistoryLimit(t *testing.T) {
	f := newDSFixture(t, newDaemonSet("agent", func(ds *api.DaemonSet) {
		ds.Spec.UpdateStrategy.Type = api.OnDelete
		ds.Spec.RevisionHistoryLimit = ptr[int32](1)
	}), newNode("n1"), newNode("n2"))
	f.reconcile()
	f.runAll()
	for i, img := range []string{"agent:2", "agent:3"} {
		f.change(func(ds *api.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = img })
		f.reconcile()
		if n := len(f.live()); n != 2 {
			t.Fatalf("change %d: %d pods, want the 2 old ones untouched (OnDelete)", i, n)
		}
	}
	// The revision of agent:2 runs nowhere and is beyond the limit of 1;
	// agent:1's runs on both nodes and stays.
	revs := f.revisions()
	if len(revs) != 2 || revs[0].Revision != 1 || revs[1].Revision != 3 {
		var got []int64
		for _, r := range revs {
			got = append(got, r.Revision)
		}
		t.Fatalf("revisions %v, want [1 3]", got)
	}
	// Deleting a pod replaces it with the current template.
	victim := f.live()[0]
	if err := f.c.Delete(t.Context(), podKind(), ns, victim.Name, api.DeleteOptions{GracePeriodSeconds: ptr[int64](0)}); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	var images []string
	for _, p := range f.live() {
		images = append(images, p.Spec.Containers[0].Image)
	}
	slices.Sort(images)
	if !slices.Equal(images, []string{"agent:1", "agent:3"}) {
		t.Fatalf("images %v, want the deleted pod replaced by agent:3", images)
	}
}

func TestDaemonSetWaitsForTheCache(t *testing.T) {
	f := newDSFixture(t, newDaemonSet("agent"), newNode("n1"))
	// A cache that never shows the pods: one create, then the controller waits.
	f.dc.pods = newStaticLister()
	f.reconcile()
	f.reconcile()
	if n := len(f.live()); n != 1 {
		t.Fatalf("%d pods, want 1: the second reconcile must wait for the cache", n)
	}
}

func TestNodeShouldRunReasons(t *testing.T) {
	ds := newDaemonSet("agent", selecting("gpu", "true"))
	api.SetDefaults(ds)
	p := templatePod(ds, "")
	for _, tc := range []struct {
		node      *api.Node
		run, cont bool
		why       string
	}{
		{newNode("a", labelled("gpu", "true")), true, true, ""},
		{newNode("b"), false, false, "node doesn't match nodeSelector gpu=true"},
		{newNode("c", labelled("gpu", "true"), tainted("dedicated", "ml", api.TaintEffectNoSched)), false, true, "untolerated taint {dedicated: ml} (NoSchedule)"},
		{newNode("d", labelled("gpu", "true"), tainted("dedicated", "ml", api.TaintEffectNoExec)), false, false, "untolerated taint {dedicated: ml} (NoExecute)"},
		{newNode("e", labelled("gpu", "true"), tainted(api.TaintUnreachable, "", api.TaintEffectNoExec), tainted(api.TaintDiskPressure, "", api.TaintEffectNoSched)), true, true, ""},
	} {
		run, cont, why := nodeShouldRun(p, tc.node)
		if run != tc.run || cont != tc.cont || why != tc.why {
			t.Errorf("node %s: (%v, %v, %q), want (%v, %v, %q)", tc.node.Name, run, cont, why, tc.run, tc.cont, tc.why)
		}
	}
}
