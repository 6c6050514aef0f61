package controllers

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
)

func newDeploymentController(t testing.TB, c *fake.Client, ev *events) *DeploymentController {
	d := NewDeploymentController(c, fakeLister{c, deploymentKind()}, fakeLister{c, replicaSetKind()}, fakeLister{c, podKind()}, ev, testLogger(t))
	d.now = now
	return d
}

// reconcileOK runs one reconcile; RequeueAfter counts as success.
func reconcileOK(t testing.TB, r client.Reconciler, key string) {
	t.Helper()
	if err := r.Reconcile(t.Context(), key); err != nil {
		var ra *client.RequeueAfterError
		if !errors.As(err, &ra) {
			t.Fatalf("reconcile %s: %v", key, err)
		}
	}
}

// settle plays the ReplicaSet controller and the nodes: every ReplicaSet's
// pods exist and are available, as many as its spec asks.
func settle(t testing.TB, c *fake.Client) {
	t.Helper()
	for _, rs := range list[*api.ReplicaSet](t, c, ns) {
		n := replicasOf(rs.Spec.Replicas)
		rs.Status = api.ReplicaSetStatus{Replicas: n, FullyLabeledReplicas: n, ReadyReplicas: n, AvailableReplicas: n, ObservedGeneration: rs.Generation}
		if _, err := c.UpdateStatus(t.Context(), rs); err != nil {
			t.Fatal(err)
		}
	}
}

func condition(d *api.Deployment, typ string) api.DeploymentCondition {
	if c := findCondition(d.Status.Conditions, typ); c != nil {
		return *c
	}
	return api.DeploymentCondition{}
}

func TestDeploymentFirstSyncCreatesReplicaSet(t *testing.T) {
	d := deployment(3, "nginx:1")
	c := fake.New(d)
	ev := &events{}
	dc := newDeploymentController(t, c, ev)

	reconcileOK(t, dc, "lab/web")

	hash := ComputeHash(&d.Spec.Template)
	name := "web-" + hash
	if got, want := writes(c), []string{"create ReplicaSet lab/" + name, "update Deployment lab/web", "update Deployment lab/web/status"}; !slices.Equal(got, want) {
		t.Errorf("writes %q, want %q", got, want)
	}
	rs := get[*api.ReplicaSet](t, c, ns, name)
	if Revision(rs) != 1 || replicasOf(rs.Spec.Replicas) != 3 {
		t.Errorf("replica set revision %d replicas %d, want 1 and 3", Revision(rs), replicasOf(rs.Spec.Replicas))
	}
	for what, labels := range map[string]map[string]string{"labels": rs.Labels, "selector": rs.Spec.Selector.MatchLabels, "template labels": rs.Spec.Template.Labels} {
		if labels[api.LabelPodTemplateHash] != hash || labels["app"] != "web" {
			t.Errorf("replica set %s %v, want app=web and %s=%s", what, labels, api.LabelPodTemplateHash, hash)
		}
	}
	if !api.IsControlledBy(rs, d.UID) {
		t.Errorf("replica set owner references %+v", rs.OwnerReferences)
	}
	got := get[*api.Deployment](t, c, ns, "web")
	if Revision(got) != 1 {
		t.Errorf("deployment revision annotation %q, want 1", got.Annotations[api.AnnotationRevision])
	}
	if p := condition(got, DeploymentProgressing); p.Reason != ReasonNewReplicaSetCreated || p.Message != fmt.Sprintf("Created new replica set %q", name) {
		t.Errorf("Progressing %+v", p)
	}
	if a := condition(got, DeploymentAvailable); a.Status != api.ConditionFalse || a.Reason != ReasonMinimumReplicasUnavailable {
		t.Errorf("Available %+v", a)
	}
	if evs := ev.take(); !slices.Equal(evs, []string{"Normal ScalingReplicaSet Scaled up replica set " + name + " to 3"}) {
		t.Errorf("events %q", evs)
	}

	// The pods come up: the rollout is complete.
	settle(t, c)
	c.ClearActions()
	reconcileOK(t, dc, "lab/web")
	got = get[*api.Deployment](t, c, ns, "web")
	want := api.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}
	st := got.Status
	st.Conditions = nil
	if !equalStatus(st, want) {
		t.Errorf("status %+v, want %+v", st, want)
	}
	if p := condition(got, DeploymentProgressing); p.Status != api.ConditionTrue || p.Reason != ReasonNewReplicaSetAvailable {
		t.Errorf("Progressing %+v, want True NewReplicaSetAvailable", p)
	}
	if a := condition(got, DeploymentAvailable); a.Status != api.ConditionTrue || a.Reason != ReasonMinimumReplicasAvailable {
		t.Errorf("Available %+v", a)
	}

	// Nothing changes: nothing is written.
	c.ClearActions()
	reconcileOK(t, dc, "lab/web")
	if w := writes(c); len(w) != 0 {
		t.Errorf("steady state wrote %q", w)
	}
}

func equalStatus(a, b api.DeploymentStatus) bool {
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// A new template rolls out in steps bounded by maxSurge and maxUnavailable:
// 3 replicas at 25% is surge 1, unavailable 0, so one pod at a time, never
// more than 4 pods and never fewer than 3 available.
func TestDeploymentRollingUpdateSteps(t *testing.T) {
	d := deployment(3, "nginx:1")
	old := rsFor(d, 1, 3)
	d2 := withImage(d, "nginx:2")
	d2.Generation = 2
	c := fake.New(d2, old)
	ev := &events{}
	dc := newDeploymentController(t, c, ev)
	newName := "web-" + ComputeHash(&d2.Spec.Template)

	reconcileOK(t, dc, "lab/web")
	rs := get[*api.ReplicaSet](t, c, ns, newName)
	if Revision(rs) != 2 || replicasOf(rs.Spec.Replicas) != 1 {
		t.Fatalf("new replica set revision %d replicas %d, want revision 2 with 1 (the surge)", Revision(rs), replicasOf(rs.Spec.Replicas))
	}
	if n := replicasOf(get[*api.ReplicaSet](t, c, ns, old.Name).Spec.Replicas); n != 3 {
		t.Fatalf("old replica set scaled to %d before the new pod was available", n)
	}

	// Play it out: after each step the pods settle, then the next step.
	type step struct{ new, old int32 }
	steps := []step{{1, 3}}
	for range 10 {
		settle(t, c)
		reconcileOK(t, dc, "lab/web")
		n := replicasOf(get[*api.ReplicaSet](t, c, ns, newName).Spec.Replicas)
		o := replicasOf(get[*api.ReplicaSet](t, c, ns, old.Name).Spec.Replicas)
		if s := (step{n, o}); s != steps[len(steps)-1] {
			steps = append(steps, s)
		}
	}
	want := []step{{1, 3}, {1, 2}, {2, 2}, {2, 1}, {3, 1}, {3, 0}}
	if !slices.Equal(steps, want) {
		t.Errorf("rollout steps (new, old) %v, want %v", steps, want)
	}
	for _, s := range steps {
		if s.new+s.old > 4 {
			t.Errorf("step %v: %d pods, above replicas+maxSurge = 4", s, s.new+s.old)
		}
	}
	got := get[*api.Deployment](t, c, ns, "web")
	if p := condition(got, DeploymentProgressing); p.Reason != ReasonNewReplicaSetAvailable {
		t.Errorf("Progressing %+v after the rollout", p)
	}
	if got.Status.UpdatedReplicas != 3 || got.Status.ObservedGeneration != 2 || Revision(got) != 2 {
		t.Errorf("status %+v revision %d", got.Status, Revision(got))
	}
	evs := ev.take()
	if evs[0] != "Normal ScalingReplicaSet Scaled up replica set "+newName+" to 1" ||
		evs[1] != "Normal ScalingReplicaSet Scaled down replica set "+old.Name+" to 2" {
		t.Errorf("events %q", evs)
	}
}

func TestFenceposts(t *testing.T) {
	tests := []struct {
		name                   string
		replicas               int32
		surge, unavail         string // "" = default
		recreate               bool
		wantSurge, wantUnavail int32
	}{
		{name: "defaults, 3 replicas", replicas: 3, wantSurge: 1, wantUnavail: 0},
		{name: "defaults, 10 replicas", replicas: 10, wantSurge: 3, wantUnavail: 2},
		{name: "numbers", replicas: 5, surge: "2", unavail: "1", wantSurge: 2, wantUnavail: 1},
		{name: "both round to zero", replicas: 1, surge: "0", unavail: "10%", wantSurge: 0, wantUnavail: 1},
		{name: "unavailable capped at replicas", replicas: 2, surge: "0", unavail: "5", wantSurge: 0, wantUnavail: 2},
		{name: "recreate", replicas: 3, recreate: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := deployment(tt.replicas, "nginx:1")
			if tt.surge != "" {
				d.Spec.Strategy.RollingUpdate.MaxSurge = intOrPercent(tt.surge)
			}
			if tt.unavail != "" {
				d.Spec.Strategy.RollingUpdate.MaxUnavailable = intOrPercent(tt.unavail)
			}
			if tt.recreate {
				d.Spec.Strategy = api.DeploymentStrategy{Type: api.Recreate}
			}
			s, u, err := fenceposts(d)
			if err != nil || s != tt.wantSurge || u != tt.wantUnavail {
				t.Errorf("fenceposts = %d, %d, %v; want %d, %d", s, u, err, tt.wantSurge, tt.wantUnavail)
			}
		})
	}
}

// Recreate: old pods all go before any new pod is created.
func TestDeploymentRecreate(t *testing.T) {
	d := deployment(3, "nginx:1")
	d.Spec.Strategy = api.DeploymentStrategy{Type: api.Recreate}
	old := rsFor(d, 1, 3)
	oldPods := []api.Object{pod(old, "old-1"), pod(old, "old-2"), pod(old, "old-3")}
	d2 := withImage(d, "nginx:2")
	c := fake.New(append([]api.Object{d2, old}, oldPods...)...)
	dc := newDeploymentController(t, c, &events{})
	newName := "web-" + ComputeHash(&d2.Spec.Template)

	// 1. Old replica set to 0.
	reconcileOK(t, dc, "lab/web")
	if got := writes(c); !slices.Contains(got, "update ReplicaSet lab/"+old.Name) || slices.Contains(got, "create ReplicaSet lab/"+newName) {
		t.Fatalf("step 1 writes %q, want the old replica set scaled and no new one", got)
	}
	if n := replicasOf(get[*api.ReplicaSet](t, c, ns, old.Name).Spec.Replicas); n != 0 {
		t.Fatalf("old replica set at %d, want 0", n)
	}

	// 2. Its pods are still terminating: wait.
	terminatingPods := newStaticLister(oldPods...)
	dc.pods = terminatingPods
	reconcileOK(t, dc, "lab/web")
	for _, w := range writes(c) {
		if w == "create ReplicaSet lab/"+newName {
			t.Fatalf("new replica set created while old pods still run")
		}
	}

	// 3. They are gone: the new replica set gets every replica at once.
	dc.pods = newStaticLister()
	reconcileOK(t, dc, "lab/web")
	rs := get[*api.ReplicaSet](t, c, ns, newName)
	if replicasOf(rs.Spec.Replicas) != 3 || Revision(rs) != 2 {
		t.Errorf("new replica set replicas %d revision %d, want 3 and 2", replicasOf(rs.Spec.Replicas), Revision(rs))
	}
}

// Old replica sets beyond revisionHistoryLimit are deleted, oldest first,
// but only once they have no pods.
func TestDeploymentCleansUpHistory(t *testing.T) {
	d := deployment(3, "nginx:1")
	d.Spec.RevisionHistoryLimit = ptr[int32](2)
	var objs []api.Object
	var rss []*api.ReplicaSet
	for rev := int64(1); rev <= 5; rev++ {
		v := withImage(d, "nginx:"+strconv.FormatInt(rev, 10))
		n := int32(0)
		if rev == 5 {
			n = 3
		}
		rs := rsFor(v, rev, n)
		if rev == 2 {
			rs.Status.Replicas = 1 // a pod still terminating
		}
		rss = append(rss, rs)
		objs = append(objs, rs)
	}
	d = withImage(d, "nginx:5")
	c := fake.New(append(objs, d)...)
	dc := newDeploymentController(t, c, &events{})

	reconcileOK(t, dc, "lab/web")
	var deleted []string
	for _, a := range c.Actions() {
		if a.Verb == "delete" {
			deleted = append(deleted, a.Name)
		}
	}
	// 4 old, limit 2: two go. Revision 2 still has a pod, so 1 and 3.
	if want := []string{rss[0].Name, rss[2].Name}; !slices.Equal(deleted, want) {
		t.Errorf("deleted %v, want %v (revisions 1 and 3)", deleted, want)
	}
}

// rollout undo copies an old template back: its replica set becomes the
// new one again, with the next revision; no replica set is created.
func TestDeploymentRollbackReusesOldReplicaSet(t *testing.T) {
	v1 := deployment(3, "nginx:1")
	v2 := withImage(v1, "nginx:2")
	rs1 := rsFor(v1, 1, 0)
	rs2 := rsFor(v2, 2, 3)
	// What the CLI does: the deployment's template becomes rs1's, without the hash label.
	undone := api.Clone(v2)
	undone.Spec.Template = api.Clone(rs1).Spec.Template
	delete(undone.Spec.Template.Labels, api.LabelPodTemplateHash)
	undone.Annotations = map[string]string{api.AnnotationRevision: "2"}
	c := fake.New(undone, rs1, rs2)
	dc := newDeploymentController(t, c, &events{})

	reconcileOK(t, dc, "lab/web")
	for _, a := range c.Actions() {
		if a.Verb == "create" {
			t.Errorf("rollback created %s %s", a.Kind, a.Name)
		}
	}
	got := get[*api.ReplicaSet](t, c, ns, rs1.Name)
	if Revision(got) != 3 {
		t.Errorf("reused replica set revision %d, want 3", Revision(got))
	}
	if n := replicasOf(got.Spec.Replicas); n != 1 {
		t.Errorf("reused replica set scaled to %d, want 1 (surge)", n)
	}
	if r := Revision(get[*api.Deployment](t, c, ns, "web")); r != 3 {
		t.Errorf("deployment revision %d, want 3", r)
	}
	hist := ReplicaSetsOf(undone, list[*api.ReplicaSet](t, c, ns))
	if len(hist) != 2 || hist[0].Name != rs2.Name || hist[1].Name != rs1.Name {
		t.Errorf("history %v, want %s (2) then %s (3)", names(hist), rs2.Name, rs1.Name)
	}
}

func names(rss []*api.ReplicaSet) []string {
	var out []string
	for _, rs := range rss {
		out = append(out, fmt.Sprintf("%s(%d)", rs.Name, Revision(rs)))
	}
	return out
}

// rollout restart sets a template annotation: a new template, a new replica set.
func TestDeploymentRestartIsANewTemplate(t *testing.T) {
	d := deployment(2, "nginx:1")
	restarted := api.Clone(d)
	restarted.Spec.Template.Annotations = map[string]string{api.AnnotationRestartedAt: "2025-03-01T12:00:00Z"}
	if ComputeHash(&d.Spec.Template) == ComputeHash(&restarted.Spec.Template) {
		t.Fatal("restartedAt did not change the template hash")
	}
	c := fake.New(restarted, rsFor(d, 1, 2))
	dc := newDeploymentController(t, c, &events{})
	reconcileOK(t, dc, "lab/web")
	if got := list[*api.ReplicaSet](t, c, ns); len(got) != 2 {
		t.Errorf("%d replica sets after restart, want 2", len(got))
	}
}

func TestComputeHash(t *testing.T) {
	a := template("nginx:1")
	b := template("nginx:1")
	b.Labels[api.LabelPodTemplateHash] = "whatever"
	c := template("nginx:2")
	if ComputeHash(&a) != ComputeHash(&b) {
		t.Error("the pod-template-hash label changed the hash")
	}
	if _, ok := b.Labels[api.LabelPodTemplateHash]; !ok {
		t.Error("ComputeHash modified its argument")
	}
	if ComputeHash(&a) == ComputeHash(&c) {
		t.Error("a different image has the same hash")
	}
	if h := ComputeHash(&a); len(h) < 6 || len(h) > 10 {
		t.Errorf("hash %q: want 6-10 characters", h)
	}
}

// A paused deployment does not roll, but still follows replicas.
func TestDeploymentPaused(t *testing.T) {
	d := deployment(3, "nginx:1")
	old := rsFor(d, 1, 3)
	paused := withImage(d, "nginx:2")
	paused.Spec.Paused = true
	paused.Spec.Replicas = ptr[int32](5)
	c := fake.New(paused, old)
	dc := newDeploymentController(t, c, &events{})

	reconcileOK(t, dc, "lab/web")
	if got := list[*api.ReplicaSet](t, c, ns); len(got) != 1 {
		t.Errorf("paused deployment created a replica set")
	}
	if n := replicasOf(get[*api.ReplicaSet](t, c, ns, old.Name).Spec.Replicas); n != 5 {
		t.Errorf("replica set at %d, want 5", n)
	}
	if p := condition(get[*api.Deployment](t, c, ns, "web"), DeploymentProgressing); p.Status != api.ConditionUnknown || p.Reason != ReasonDeploymentPaused {
		t.Errorf("Progressing %+v, want Unknown DeploymentPaused", p)
	}
}

// Scaling a finished rollout scales its replica set, up or down.
func TestDeploymentScale(t *testing.T) {
	for _, n := range []int32{5, 1, 0} {
		t.Run(strconv.Itoa(int(n)), func(t *testing.T) {
			d := deployment(3, "nginx:1")
			rs := rsFor(d, 1, 3)
			d.Spec.Replicas = ptr(n)
			c := fake.New(d, rs)
			dc := newDeploymentController(t, c, &events{})
			reconcileOK(t, dc, "lab/web")
			if got := replicasOf(get[*api.ReplicaSet](t, c, ns, rs.Name).Spec.Replicas); got != n {
				t.Errorf("replica set at %d, want %d", got, n)
			}
		})
	}
}

// A rollout that makes no progress for progressDeadlineSeconds is reported.
func TestDeploymentProgressDeadline(t *testing.T) {
	d := deployment(3, "nginx:2")
	old := rsFor(withImage(d, "nginx:1"), 1, 3)
	stuck := rsFor(d, 2, 1)
	stuck.Status = api.ReplicaSetStatus{Replicas: 1, ObservedGeneration: 1} // its pod never gets ready
	since := api.NewTime(t0.Add(-11 * time.Minute))
	d.Status = api.DeploymentStatus{
		ObservedGeneration: 1, Replicas: 4, UpdatedReplicas: 1, ReadyReplicas: 3, AvailableReplicas: 3,
		Conditions: []api.DeploymentCondition{
			{Type: DeploymentAvailable, Status: api.ConditionTrue, Reason: ReasonMinimumReplicasAvailable, Message: "Deployment has minimum availability.", LastUpdateTime: since, LastTransitionTime: since},
			{Type: DeploymentProgressing, Status: api.ConditionTrue, Reason: ReasonReplicaSetUpdated, Message: "x", LastUpdateTime: since, LastTransitionTime: since},
		},
	}
	c := fake.New(d, old, stuck)
	ev := &events{}
	dc := newDeploymentController(t, c, ev)
	reconcileOK(t, dc, "lab/web")
	p := condition(get[*api.Deployment](t, c, ns, "web"), DeploymentProgressing)
	if p.Status != api.ConditionFalse || p.Reason != ReasonProgressDeadlineExceeded || p.Message != fmt.Sprintf("ReplicaSet %q has timed out progressing.", stuck.Name) {
		t.Errorf("Progressing %+v, want False ProgressDeadlineExceeded", p)
	}

	// Within the deadline, the controller asks to look again when it passes.
	d.Status.Conditions[1].LastUpdateTime = api.NewTime(t0.Add(-9 * time.Minute))
	c = fake.New(d, old, stuck)
	dc = newDeploymentController(t, c, ev)
	err := dc.Reconcile(t.Context(), "lab/web")
	var ra *client.RequeueAfterError
	if !errors.As(err, &ra) || ra.After < time.Minute || ra.After > 2*time.Minute {
		t.Errorf("reconcile within the deadline: %v, want RequeueAfter about 1m", err)
	}
}
