package controllers

import (
	"errors"
	"slices"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
)

func newRSController(t testing.TB, c *fake.Client, ev *events) *ReplicaSetController {
	r := NewReplicaSetController(c, fakeLister{c, replicaSetKind()}, fakeLister{c, podKind()}, ev, testLogger(t))
	r.now = now
	return r
}

func TestReplicaSetScaleUpFromZero(t *testing.T) {
	rs := rsFor(deployment(3, "nginx:1"), 1, 3)
	rs.Status = api.ReplicaSetStatus{}
	c := fake.New(rs)
	ev := &events{}
	r := newRSController(t, c, ev)

	if err := r.Reconcile(t.Context(), api.KeyOf(rs)); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	created := writesOf[*api.Pod](c, "create", "Pod", "")
	if len(created) != 3 {
		t.Fatalf("created %d pods, want 3; writes: %v", len(created), writes(c))
	}
	var names []string
	for _, p := range created {
		names = append(names, p.Name)
		if p.Namespace != ns {
			t.Errorf("pod %s in namespace %q, want %q", p.Name, p.Namespace, ns)
		}
		if len(p.Name) != len(rs.Name)+6 {
			t.Errorf("pod name %q: want %s-<5 characters>", p.Name, rs.Name)
		}
		if !api.IsControlledBy(p, rs.UID) {
			t.Errorf("pod %s: owner references %+v, want a controller reference to %s", p.Name, p.OwnerReferences, rs.UID)
		}
		if ref := api.ControllerOf(p); ref != nil && (ref.Kind != "ReplicaSet" || ref.APIVersion != "apps/v1" || ref.Name != rs.Name) {
			t.Errorf("pod %s: controller reference %+v", p.Name, *ref)
		}
		if p.Labels[api.LabelPodTemplateHash] != rs.Labels[api.LabelPodTemplateHash] || p.Labels["app"] != "web" {
			t.Errorf("pod %s labels %v, want the template's", p.Name, p.Labels)
		}
		if p.Spec.Containers[0].Image != "nginx:1" {
			t.Errorf("pod %s image %q", p.Name, p.Spec.Containers[0].Image)
		}
	}
	if !namesWithPrefix(names, rs.Name+"-") {
		t.Errorf("pod names %v, want prefix %s-", names, rs.Name)
	}
	if got := ev.take(); len(got) != 3 || got[0] != "Normal SuccessfulCreate Created pod: "+names[0] {
		t.Errorf("events %q, want 3 SuccessfulCreate", got)
	}

	// The next reconcile sees 3 pods and creates nothing more; status counts them.
	c.ClearActions()
	if err := r.Reconcile(t.Context(), api.KeyOf(rs)); err != nil {
		t.Fatalf("second reconcile: %v", err)
	}
	if got := writesOf[*api.Pod](c, "create", "Pod", ""); len(got) != 0 {
		t.Errorf("second reconcile created %d more pods", len(got))
	}
	if got := get[*api.ReplicaSet](t, c, ns, rs.Name).Status; got.Replicas != 3 || got.ObservedGeneration != 1 {
		t.Errorf("status %+v, want replicas 3, observedGeneration 1", got)
	}
}

// While the pod cache has not shown the pods just created, the controller
// must not create them again.
func TestReplicaSetExpectationsWaitForCache(t *testing.T) {
	rs := rsFor(deployment(2, "nginx:1"), 1, 2)
	rs.Status = api.ReplicaSetStatus{}
	c := fake.New(rs)
	r := newRSController(t, c, &events{})
	r.pods = newStaticLister() // a cache that never catches up

	if err := r.Reconcile(t.Context(), api.KeyOf(rs)); err != nil {
		var ra *client.RequeueAfterError
		if !errors.As(err, &ra) {
			t.Fatalf("reconcile: %v", err)
		}
	}
	if n := len(writesOf[*api.Pod](c, "create", "Pod", "")); n != 2 {
		t.Fatalf("first reconcile created %d pods, want 2", n)
	}
	c.ClearActions()

	err := r.Reconcile(t.Context(), api.KeyOf(rs))
	var ra *client.RequeueAfterError
	if !errors.As(err, &ra) {
		t.Errorf("reconcile while waiting for the cache: err %v, want RequeueAfter", err)
	}
	if n := len(writesOf[*api.Pod](c, "create", "Pod", "")); n != 0 {
		t.Errorf("created %d pods again while the cache lagged", n)
	}

	// Once the cache shows them, the controller acts again (nothing to do).
	r.pods = fakeLister{c, podKind()}
	if err := r.Reconcile(t.Context(), api.KeyOf(rs)); err != nil {
		t.Fatalf("reconcile after the cache caught up: %v", err)
	}
	if n := len(writesOf[*api.Pod](c, "create", "Pod", "")); n != 0 {
		t.Errorf("created %d pods after the cache caught up, want 0", n)
	}

	// Expectations that can never be met expire.
	r.pods = newStaticLister()
	r.expect.expectCreate(api.KeyOf(rs), "never-seen", t0)
	r.now = func() time.Time { return t0.Add(expectationsTTL + time.Second) }
	c.ClearActions()
	if err := r.Reconcile(t.Context(), api.KeyOf(rs)); err != nil && !errors.As(err, &ra) {
		t.Fatal(err)
	}
	if n := len(writesOf[*api.Pod](c, "create", "Pod", "")); n != 2 {
		t.Errorf("after expiry created %d pods, want 2 (the stale cache shows none)", n)
	}
}

func TestReplicaSetScaleDownDeletesLeastValuableFirst(t *testing.T) {
	rs := rsFor(deployment(2, "nginx:1"), 1, 2)
	objs := []api.Object{rs,
		pod(rs, "old-ready", readyAt(t0.Add(-3*time.Hour))),
		pod(rs, "new-ready", readyAt(t0.Add(-time.Minute))),
		pod(rs, "not-ready", notReady),
		pod(rs, "pending", pending),
		pod(rs, "unscheduled", unscheduled),
		pod(rs, "crashy", withRestarts(5), readyAt(t0.Add(-3*time.Hour))),
		pod(rs, "finished", phase(api.PodSucceeded)), // does not count
		pod(rs, "leaving", terminating),              // does not count
	}
	c := fake.New(objs...)
	ev := &events{}
	r := newRSController(t, c, ev)

	if err := r.Reconcile(t.Context(), api.KeyOf(rs)); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	var deleted []string
	for _, a := range c.Actions() {
		if a.Verb == "delete" {
			deleted = append(deleted, a.Name)
		}
	}
	// 6 active, 2 desired: 4 go, cheapest first.
	want := []string{"unscheduled", "pending", "not-ready", "new-ready"}
	if !slices.Equal(deleted, want) {
		t.Errorf("deleted %v, want %v", deleted, want)
	}
	if got := ev.take(); len(got) != 4 || got[0] != "Normal SuccessfulDelete Deleted pod: unscheduled" {
		t.Errorf("events %q", got)
	}
}

func TestDeleteFirstOrder(t *testing.T) {
	rs := rsFor(deployment(1, "nginx:1"), 1, 1)
	tests := []struct {
		name        string
		first, then *api.Pod
	}{
		{"unscheduled before scheduled", pod(rs, "a", unscheduled), pod(rs, "b", pending)},
		{"pending before running", pod(rs, "a", pending), pod(rs, "b", notReady)},
		{"unknown before running", pod(rs, "a", phase(api.PodUnknown), notReady), pod(rs, "b", notReady)},
		{"not ready before ready", pod(rs, "a", notReady), pod(rs, "b")},
		{"ready recently before ready long", pod(rs, "a", readyAt(t0.Add(-time.Minute))), pod(rs, "b", readyAt(t0.Add(-time.Hour)))},
		{"more restarts first", pod(rs, "a", withRestarts(3)), pod(rs, "b", withRestarts(1))},
		{"newer before older", pod(rs, "a", createdAt(t0.Add(-time.Minute))), pod(rs, "b", createdAt(t0.Add(-time.Hour)))},
		{"then by name", pod(rs, "a"), pod(rs, "b")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if deleteFirst(tt.first, tt.then) >= 0 || deleteFirst(tt.then, tt.first) <= 0 {
				t.Errorf("want %s deleted before %s", tt.first.Name, tt.then.Name)
			}
		})
	}
}

func TestReplicaSetAdoptsAndReleases(t *testing.T) {
	rs := rsFor(deployment(2, "nginx:1"), 1, 2)
	other := rsFor(withImage(deployment(1, "nginx:1"), "nginx:2"), 2, 1)
	objs := []api.Object{rs, other,
		pod(rs, "mine"),
		pod(rs, "stray", orphan), // matches: adopted
		pod(rs, "moved-away", withLabels("app", "debug")),                          // ours, no longer matches: released
		pod(other, "theirs", withLabels(mapToKV(rs.Spec.Selector.MatchLabels)...)), // matches, but controlled by other
		pod(rs, "unrelated", orphan, withLabels("app", "db")),                      // orphan, no match: untouched
	}
	c := fake.New(objs...)
	r := newRSController(t, c, &events{})

	if err := r.Reconcile(t.Context(), api.KeyOf(rs)); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	got := writes(c)
	// mine + stray = 2 = replicas, and the status already says so.
	want := []string{"update Pod lab/moved-away", "update Pod lab/stray"}
	if !slices.Equal(got, want) {
		t.Errorf("writes %q, want %q", got, want)
	}
	if p := get[*api.Pod](t, c, ns, "stray"); !api.IsControlledBy(p, rs.UID) {
		t.Errorf("stray pod not adopted: %+v", p.OwnerReferences)
	}
	if p := get[*api.Pod](t, c, ns, "moved-away"); len(p.OwnerReferences) != 0 {
		t.Errorf("moved-away pod not released: %+v", p.OwnerReferences)
	}
	if p := get[*api.Pod](t, c, ns, "theirs"); !api.IsControlledBy(p, other.UID) {
		t.Errorf("other's pod taken: %+v", p.OwnerReferences)
	}
	// mine + stray = 2 = replicas: nothing created or deleted.
	if st := get[*api.ReplicaSet](t, c, ns, rs.Name).Status; st.Replicas != 2 {
		t.Errorf("status replicas %d, want 2", st.Replicas)
	}
}

func mapToKV(m map[string]string) []string {
	var kv []string
	for k, v := range m {
		kv = append(kv, k, v)
	}
	return kv
}

func TestReplicaSetStatus(t *testing.T) {
	rs := rsFor(deployment(5, "nginx:1"), 1, 5)
	rs.Spec.MinReadySeconds = 30
	rs.Generation = 4
	objs := []api.Object{rs,
		pod(rs, "available"), // ready an hour ago
		pod(rs, "just-ready", readyAt(t0.Add(-10*time.Second))), // ready, 20s short of available
		pod(rs, "not-ready", notReady),
		pod(rs, "half-labeled", withLabels("app", "web")), // lost its hash label: released
		pod(rs, "failed", phase(api.PodFailed)),
		pod(rs, "leaving", terminating),
	}
	c := fake.New(objs...)
	r := newRSController(t, c, &events{})

	err := r.Reconcile(t.Context(), api.KeyOf(rs))
	var ra *client.RequeueAfterError
	if !errors.As(err, &ra) || ra.After != 20*time.Second {
		t.Errorf("reconcile: %v, want RequeueAfter 20s (when just-ready becomes available)", err)
	}
	got := get[*api.ReplicaSet](t, c, ns, rs.Name).Status
	// half-labeled no longer matches the selector (it lacks the hash label):
	// it is released, so 3 active pods remain, and 2 are created.
	want := api.ReplicaSetStatus{Replicas: 3, FullyLabeledReplicas: 3, ReadyReplicas: 2, AvailableReplicas: 1, ObservedGeneration: 4}
	if got != want {
		t.Errorf("status %+v, want %+v", got, want)
	}
	if n := len(writesOf[*api.Pod](c, "create", "Pod", "")); n != 2 {
		t.Errorf("created %d pods, want 2 (5 desired, 3 active)", n)
	}
}

func TestReplicaSetFullyLabeled(t *testing.T) {
	rs := rsFor(deployment(2, "nginx:1"), 1, 2)
	rs.Spec.Template.Labels["tier"] = "front" // the template has a label the selector does not require
	objs := []api.Object{rs, pod(rs, "full"), pod(rs, "partial")}
	c := fake.New(objs...)
	p := get[*api.Pod](t, c, ns, "partial")
	delete(p.Labels, "tier")
	if _, err := c.Update(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	r := newRSController(t, c, &events{})
	if err := r.Reconcile(t.Context(), api.KeyOf(rs)); err != nil {
		t.Fatal(err)
	}
	if got := get[*api.ReplicaSet](t, c, ns, rs.Name).Status; got.Replicas != 2 || got.FullyLabeledReplicas != 1 {
		t.Errorf("status %+v, want replicas 2, fullyLabeled 1", got)
	}
}

func TestReplicaSetStatusUnchangedWritesNothing(t *testing.T) {
	rs := rsFor(deployment(1, "nginx:1"), 1, 1)
	c := fake.New(rs, pod(rs, "only"))
	r := newRSController(t, c, &events{})
	if err := r.Reconcile(t.Context(), api.KeyOf(rs)); err != nil {
		t.Fatal(err)
	}
	if got := writes(c); len(got) != 0 {
		t.Errorf("steady state wrote %q, want nothing", got)
	}
}

func TestReplicaSetGone(t *testing.T) {
	c := fake.New()
	r := newRSController(t, c, &events{})
	if err := r.Reconcile(t.Context(), "lab/nothing"); err != nil {
		t.Fatal(err)
	}
	if got := writes(c); len(got) != 0 {
		t.Errorf("wrote %q for a missing replica set", got)
	}
}
