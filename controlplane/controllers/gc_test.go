package controllers

import (
	"slices"
	"sync"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
)

func newGC(t testing.TB, c *fake.Client) *GarbageCollector {
	graph := map[string]Lister{
		"Pod":        fakeLister{c, podKind()},
		"ReplicaSet": fakeLister{c, replicaSetKind()},
		"Deployment": fakeLister{c, deploymentKind()},
	}
	return NewGarbageCollector(c, graph, &events{}, testLogger(t))
}

func TestGarbageCollector(t *testing.T) {
	d := deployment(1, "nginx:1")
	alive := rsFor(d, 1, 1) // its deployment d is not in the store: it is garbage too
	gone := rsFor(withImage(d, "nginx:2"), 2, 1)
	gone.UID = "uid-gone"
	renamed := rsFor(withImage(d, "nginx:1"), 3, 1)
	renamed.UID = "uid-old-incarnation" // same name as alive, another uid
	foreign := api.OwnerReference{APIVersion: "example.com/v1", Kind: "Widget", Name: "w", UID: "uid-w"}

	both := pod(alive, "both-owners")
	both.OwnerReferences = append(both.OwnerReferences, controllerRef(gone))
	both.OwnerReferences[1].Controller = nil
	unknown := pod(alive, "unknown-owner", orphan)
	unknown.OwnerReferences = []api.OwnerReference{foreign}

	objs := []api.Object{alive,
		pod(alive, "kept"),
		pod(gone, "orphaned"),
		pod(renamed, "old-incarnation"),
		both,
		unknown,
		pod(alive, "no-owner", orphan),
	}
	c := fake.New(objs...)
	gc := newGC(t, c)

	keys := []string{"Pod:lab/kept", "Pod:lab/orphaned", "Pod:lab/old-incarnation", "Pod:lab/both-owners",
		"Pod:lab/unknown-owner", "Pod:lab/no-owner", "ReplicaSet:lab/" + alive.Name, "Pod:lab/missing", "Bogus:lab/x"}
	for _, k := range keys {
		if err := gc.Reconcile(t.Context(), k); err != nil {
			t.Fatalf("reconcile %s: %v", k, err)
		}
	}
	var deleted []string
	for _, a := range c.Actions() {
		if a.Verb == "delete" {
			deleted = append(deleted, a.Kind+" "+a.Name)
		}
	}
	want := []string{"Pod orphaned", "Pod old-incarnation", "ReplicaSet " + alive.Name}
	if !slices.Equal(deleted, want) {
		t.Errorf("deleted %v, want %v", deleted, want)
	}
}

// An owner the cache has not seen yet (just created) is checked with the
// API before its dependents are deleted; an owner confirmed gone is
// remembered.
func TestGarbageCollectorConfirmsWithTheAPI(t *testing.T) {
	rs := rsFor(deployment(1, "nginx:1"), 1, 1)
	rs.OwnerReferences = nil
	c := fake.New(rs, pod(rs, "young"))
	gc := newGC(t, c)
	gc.graph["ReplicaSet"] = newStaticLister() // the cache lags: no replica sets yet

	var mu sync.Mutex
	gets := 0
	c.Intercept(func(a fake.Action) error {
		if a.Verb == "get" && a.Kind == "ReplicaSet" {
			mu.Lock()
			gets++
			mu.Unlock()
		}
		return nil
	})
	if err := gc.Reconcile(t.Context(), "Pod:lab/young"); err != nil {
		t.Fatal(err)
	}
	if w := writes(c); len(w) != 0 {
		t.Errorf("deleted a pod whose owner exists: %q", w)
	}
	if gets != 1 {
		t.Errorf("%d live gets of the owner, want 1", gets)
	}

	// The owner goes; the first check confirms it, the next ones remember.
	gc.ownerExists(t.Context(), ns, api.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "nope", UID: "uid-nope"})
	gets = 0
	exists, err := gc.ownerExists(t.Context(), ns, api.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "nope", UID: "uid-nope"})
	if exists || err != nil || gets != 0 {
		t.Errorf("second check of a gone owner: exists %v, err %v, %d gets; want false, nil, 0", exists, err, gets)
	}
}
