package controllers

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
)

// finalizer records FinalizeNamespace calls.
type finalizer struct{ calls []string }

func (f *finalizer) FinalizeNamespace(_ context.Context, name string) error {
	f.calls = append(f.calls, name)
	return nil
}

func namespace(name string, terminating bool) *api.Namespace {
	n := &api.Namespace{
		ObjectMeta: api.ObjectMeta{Name: name, UID: "uid-ns-" + name},
		Spec:       api.NamespaceSpec{Finalizers: []string{finalizerKubernetes}},
		Status:     api.NamespaceStatus{Phase: api.NamespaceActive},
	}
	if terminating {
		ts := api.NewTime(t0)
		n.DeletionTimestamp = &ts
		n.Status.Phase = api.NamespaceTerminating
	}
	return n
}

func TestNamespaceDeletesContentsThenFinalizes(t *testing.T) {
	d := deployment(1, "nginx:1")
	rs := rsFor(d, 1, 1)
	cm := &api.ConfigMap{ObjectMeta: api.ObjectMeta{Name: "settings", Namespace: ns}}
	ev := &api.Event{ObjectMeta: api.ObjectMeta{Name: "web.1", Namespace: ns}, Reason: "ScalingReplicaSet"}
	elsewhere := &api.ConfigMap{ObjectMeta: api.ObjectMeta{Name: "keep", Namespace: "other"}}
	c := fake.New(namespace(ns, true), namespace("other", false), d, rs, pod(rs, "web-1"), cm, ev, elsewhere)
	fin := &finalizer{}
	nc := NewNamespaceController(c, fin, fakeLister{c, namespaceKind()}, &events{}, testLogger(t))

	// First pass: everything deleted, owners first, events last; the pod
	// may still be stopping on its node, so look again.
	err := nc.Reconcile(t.Context(), ns)
	var ra *client.RequeueAfterError
	if !errors.As(err, &ra) {
		t.Fatalf("first reconcile: %v, want RequeueAfter (pods may still be stopping)", err)
	}
	var deleted []string
	for _, w := range writes(c) {
		deleted = append(deleted, strings.TrimPrefix(w, "delete "))
	}
	want := []string{"Deployment lab/web", "ReplicaSet lab/" + rs.Name, "ConfigMap lab/settings", "Pod lab/web-1", "Event lab/web.1"}
	if !slices.Equal(deleted, want) {
		t.Errorf("deleted %q, want %q", deleted, want)
	}
	if len(fin.calls) != 0 {
		t.Errorf("finalized before the namespace was empty")
	}

	// Second pass: empty, so finalize.
	if err := nc.Reconcile(t.Context(), ns); err != nil {
		t.Fatalf("second reconcile: %v", err)
	}
	if !slices.Equal(fin.calls, []string{ns}) {
		t.Errorf("finalize calls %q, want [%s]", fin.calls, ns)
	}
	if _, err := c.Get(t.Context(), api.MustKindOf(elsewhere), "other", "keep"); err != nil {
		t.Errorf("object in another namespace: %v", err)
	}
}

func TestNamespaceWaitsForTerminatingPods(t *testing.T) {
	rs := rsFor(deployment(1, "nginx:1"), 1, 1)
	rs.OwnerReferences = nil
	p := pod(rs, "stopping", terminating)
	c := fake.New(namespace(ns, true), p)
	fin := &finalizer{}
	nc := NewNamespaceController(c, fin, fakeLister{c, namespaceKind()}, &events{}, testLogger(t))

	err := nc.Reconcile(t.Context(), ns)
	var ra *client.RequeueAfterError
	if !errors.As(err, &ra) || ra.After != namespaceRecheck {
		t.Errorf("reconcile: %v, want RequeueAfter %s", err, namespaceRecheck)
	}
	if w := writes(c); len(w) != 0 {
		t.Errorf("deleted a terminating pod again: %q", w)
	}
	if len(fin.calls) != 0 {
		t.Error("finalized while a pod was still stopping")
	}
}

func TestNamespaceLeavesActiveAndFinalizedAlone(t *testing.T) {
	finalized := namespace("done", true)
	finalized.Spec.Finalizers = nil
	cm := &api.ConfigMap{ObjectMeta: api.ObjectMeta{Name: "settings", Namespace: "active"}}
	c := fake.New(namespace("active", false), finalized, cm)
	fin := &finalizer{}
	nc := NewNamespaceController(c, fin, fakeLister{c, namespaceKind()}, &events{}, testLogger(t))
	for _, key := range []string{"active", "done", "missing"} {
		if err := nc.Reconcile(t.Context(), key); err != nil {
			t.Errorf("reconcile %s: %v", key, err)
		}
	}
	if w := writes(c); len(w) != 0 || len(fin.calls) != 0 {
		t.Errorf("writes %q, finalize calls %q; want none", w, fin.calls)
	}
}

func TestNamespaceDeletionFailureIsReported(t *testing.T) {
	cm := &api.ConfigMap{ObjectMeta: api.ObjectMeta{Name: "settings", Namespace: ns}}
	c := fake.New(namespace(ns, true), cm)
	c.Intercept(func(a fake.Action) error {
		if a.Verb == "delete" {
			return api.NewInternal(errors.New("disk full"))
		}
		return nil
	})
	fin := &finalizer{}
	evs := &events{}
	nc := NewNamespaceController(c, fin, fakeLister{c, namespaceKind()}, evs, testLogger(t))

	if err := nc.Reconcile(t.Context(), ns); err == nil {
		t.Fatal("reconcile succeeded despite a failed delete")
	}
	got := evs.take()
	if len(got) != 1 || !strings.HasPrefix(got[0], "Warning NamespaceDeletionContentFailure ") || !strings.Contains(got[0], "disk full") {
		t.Errorf("events %q, want one NamespaceDeletionContentFailure", got)
	}
	if len(fin.calls) != 0 {
		t.Error("finalized after a failed delete")
	}
}

// listCounter counts the lists through the API, per kind.
type listCounter struct {
	*fake.Client
	lists map[string]int
}

func (c *listCounter) List(ctx context.Context, k *api.Kind, namespace string, opts api.ListOptions) ([]api.Object, string, error) {
	c.lists[k.Kind]++
	return c.Client.List(ctx, k, namespace, opts)
}

// With caches, the pods to delete come from the pod cache (no API list of
// every pod); a cache that says "empty" is never trusted alone.
func TestNamespaceDeletesFromCaches(t *testing.T) {
	rs := rsFor(deployment(1, "nginx:1"), 1, 1)
	rs.OwnerReferences = nil
	a, b := pod(rs, "web-a", orphan), pod(rs, "web-b", orphan)
	tests := []struct {
		name     string
		cached   []api.Object // the pod cache
		podLists int          // pod lists through the API
		wantPods []string     // pods deleted
	}{
		{"cache has the pods", []api.Object{a, b}, 0, []string{"Pod lab/web-a", "Pod lab/web-b"}},
		{"cache lags: empty but the API has them", nil, 1, []string{"Pod lab/web-a", "Pod lab/web-b"}},
		{"cache has one, the API two: the cached one now, the other next pass", []api.Object{b}, 0, []string{"Pod lab/web-b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &listCounter{Client: fake.New(namespace(ns, true), a, b), lists: map[string]int{}}
			fin := &finalizer{}
			nc := NewNamespaceController(c, fin, fakeLister{c.Client, namespaceKind()}, &events{}, testLogger(t))
			nc.UseCaches(map[string]Lister{"Pod": newStaticLister(tt.cached...)})
			err := nc.Reconcile(t.Context(), ns)
			var ra *client.RequeueAfterError
			if !errors.As(err, &ra) {
				t.Fatalf("reconcile: %v, want RequeueAfter (pods stopping)", err)
			}
			var pods []string
			for _, w := range writes(c.Client) {
				if d := strings.TrimPrefix(w, "delete "); strings.HasPrefix(d, "Pod ") {
					pods = append(pods, d)
				}
			}
			slices.Sort(pods) // the static cache lists in map order
			if !slices.Equal(pods, tt.wantPods) {
				t.Errorf("deleted pods %q, want %q", pods, tt.wantPods)
			}
			if c.lists["Pod"] != tt.podLists {
				t.Errorf("%d pod lists through the API, want %d", c.lists["Pod"], tt.podLists)
			}
			if c.lists["ConfigMap"] != 1 {
				t.Errorf("%d configmap lists, want 1 (no cache for them)", c.lists["ConfigMap"])
			}
			if len(fin.calls) != 0 {
				t.Error("finalized with pods left")
			}
		})
	}
}

func TestNamespaceRecreatesSystemNamespaces(t *testing.T) {
	c := fake.New(namespace("other", false))
	nc := NewNamespaceController(c, &finalizer{}, fakeLister{c, namespaceKind()}, &events{}, testLogger(t))
	for _, name := range []string{api.NamespaceNodeLease, "gone"} {
		if err := nc.Reconcile(t.Context(), name); err != nil {
			t.Fatalf("reconcile %s: %v", name, err)
		}
	}
	if got, want := writes(c), []string{"create Namespace " + api.NamespaceNodeLease}; !slices.Equal(got, want) {
		t.Errorf("writes %q, want %q (a system namespace comes back, another does not)", got, want)
	}
	// Again: it exists now, nothing to do.
	if err := nc.Reconcile(t.Context(), api.NamespaceNodeLease); err != nil {
		t.Fatal(err)
	}
	if got := writes(c); len(got) != 0 {
		t.Errorf("second reconcile wrote %q", got)
	}
}
