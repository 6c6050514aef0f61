package clienttest

import (
	"strings"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// The suite's delete tests: at once, finalizers, a pod's grace period, a
// namespace's termination.

func (s *suite) testDelete(t *testing.T) {
	c := s.tg.New(t)
	ctx := t.Context()
	cm := mustCreate(t, c, newConfigMap("cfg", nil))
	wrong := "33333333-3333-4333-8333-333333333333"
	stale := cm.ResourceVersion + "0" // another revision
	neg := int64(-1)

	cases := []struct {
		name string
		opts api.DeleteOptions
		want api.StatusReason
	}{
		{"uid precondition", api.DeleteOptions{Preconditions: &api.Preconditions{UID: &wrong}}, api.ReasonConflict},
		{"resourceVersion precondition", api.DeleteOptions{Preconditions: &api.Preconditions{ResourceVersion: &stale}}, api.ReasonConflict},
		{"orphan", api.DeleteOptions{PropagationPolicy: "Orphan"}, api.ReasonBadRequest},
		{"negative grace", api.DeleteOptions{GracePeriodSeconds: &neg}, api.ReasonBadRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Delete(ctx, cmKind, "default", "cfg", tc.opts)
			wantReason(t, "delete", err, tc.want)
		})
	}
	if _, err := c.Get(ctx, cmKind, "default", "cfg"); err != nil {
		t.Fatalf("get after refused deletes: %v", err)
	}

	if err := c.Delete(ctx, cmKind, "default", "cfg", api.DeleteOptions{PropagationPolicy: "Background", Preconditions: &api.Preconditions{UID: &cm.UID}}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := c.Get(ctx, cmKind, "default", "cfg"); !api.IsNotFound(err) {
		t.Errorf("get after delete: %v, want NotFound", err)
	}
	wantReason(t, "second delete", c.Delete(ctx, cmKind, "default", "cfg", api.DeleteOptions{}), api.ReasonNotFound)
	wantReason(t, "delete namespace default", c.Delete(ctx, nsKind, "", "default", api.DeleteOptions{}), api.ReasonForbidden)

	// An unbound pod has nothing to wait for.
	mustCreate(t, c, newPod("pending"))
	if err := c.Delete(ctx, podKind, "default", "pending", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, podKind, "default", "pending"); !api.IsNotFound(err) {
		t.Errorf("unbound pod after delete: %v, want NotFound", err)
	}
}

func (s *suite) testDeleteFinalizers(t *testing.T) {
	c := s.tg.New(t)
	ctx := t.Context()
	in := newConfigMap("held", nil)
	in.Finalizers = []string{"example.com/hold"}
	mustCreate(t, c, in)

	for i := range 2 { // the second delete changes nothing
		if err := c.Delete(ctx, cmKind, "default", "held", api.DeleteOptions{}); err != nil {
			t.Fatalf("delete %d: %v", i+1, err)
		}
	}
	cm := mustGet[*api.ConfigMap](t, c, "default", "held")
	if cm.DeletionTimestamp == nil {
		t.Fatal("deletionTimestamp not set on an object with finalizers")
	}

	// An update keeps the deletionTimestamp; clearing the last finalizer removes the object.
	upd := api.Clone(cm)
	upd.DeletionTimestamp = nil
	upd.Labels = map[string]string{"still": "here"}
	cm, err := client.Update(ctx, c, upd)
	if err != nil {
		t.Fatal(err)
	}
	if cm.DeletionTimestamp == nil {
		t.Error("update cleared deletionTimestamp")
	}
	cm.Finalizers = nil
	if _, err := client.Update(ctx, c, cm); err != nil {
		t.Fatalf("clear finalizers: %v", err)
	}
	if _, err := c.Get(ctx, cmKind, "default", "held"); !api.IsNotFound(err) {
		t.Errorf("get after the last finalizer went: %v, want NotFound", err)
	}
}

func (s *suite) testDeleteGracefulPod(t *testing.T) {
	c := s.tg.New(t)
	ctx := t.Context()
	cases := []struct {
		name      string
		grace     *int64
		wantGrace int64
	}{
		{"default grace", nil, api.DefaultTerminationGracePeriod},
		{"grace from options", ptr(int64(5)), 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.ReplaceAll(tc.name, " ", "-")
			p := mustBind(t, c, mustCreate(t, c, newPod(name)), "node-1")
			if err := c.Delete(ctx, podKind, "default", name, api.DeleteOptions{GracePeriodSeconds: tc.grace}); err != nil {
				t.Fatal(err)
			}
			got := mustGet[*api.Pod](t, c, "default", name)
			if got.DeletionTimestamp == nil || got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != tc.wantGrace {
				t.Fatalf("deletionTimestamp %v deletionGracePeriodSeconds %v, want set and %d", got.DeletionTimestamp, got.DeletionGracePeriodSeconds, tc.wantGrace)
			}
			if got.UID != p.UID {
				t.Errorf("uid changed")
			}
			// The node, once the pod stopped, deletes with grace 0.
			if err := c.Delete(ctx, podKind, "default", name, api.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Get(ctx, podKind, "default", name); !api.IsNotFound(err) {
				t.Errorf("get after delete with grace 0: %v, want NotFound", err)
			}
		})
	}
}

func (s *suite) testDeleteNamespace(t *testing.T) {
	c := s.tg.New(t)
	ctx := t.Context()
	fin, ok := c.(NamespaceFinalizer)
	if !ok {
		t.Fatalf("%T has no FinalizeNamespace", c)
	}
	mustCreate(t, c, newNamespace("team"))
	if err := c.Delete(ctx, nsKind, "", "team", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ns := mustGet[*api.Namespace](t, c, "", "team")
	if ns.DeletionTimestamp == nil || ns.Status.Phase != api.NamespaceTerminating {
		t.Fatalf("deleted namespace: deletionTimestamp %v phase %q, want set and Terminating", ns.DeletionTimestamp, ns.Status.Phase)
	}
	if err := fin.FinalizeNamespace(ctx, "team"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, nsKind, "", "team"); !api.IsNotFound(err) {
		t.Errorf("get after FinalizeNamespace: %v, want NotFound", err)
	}
}
