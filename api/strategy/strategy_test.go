package strategy

import (
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
)

// Bind refuses a pod on a node or being deleted, and a stale uid; it sets
// the node and PodScheduled on the pod it is given (a copy: the store's).
func TestBind(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	b := &api.Binding{ObjectMeta: api.ObjectMeta{Name: "p"}, Target: api.ObjectReference{Kind: "Node", Name: "n1"}}
	pod := &api.Pod{ObjectMeta: api.ObjectMeta{Name: "p", UID: "u1"}}
	got, err := Bind(api.Clone(pod), b, now)
	if err != nil || got.Spec.NodeName != "n1" || pod.Spec.NodeName != "" {
		t.Fatalf("Bind = %+v, %v; want n1", got, err)
	}
	if c := got.Status.Conditions; len(c) != 1 || c[0].Type != api.PodScheduled || c[0].Status != api.ConditionTrue || !c[0].LastTransitionTime.Equal(now.Truncate(time.Second)) {
		t.Errorf("conditions %+v", c)
	}
	for _, tt := range []struct {
		name string
		pod  *api.Pod
		uid  string
		want string
	}{
		{"bound", got, "", `pod p is already assigned to node "n1"`},
		{"deleting", &api.Pod{ObjectMeta: api.ObjectMeta{Name: "p", DeletionTimestamp: &api.Time{Time: now}}}, "", "pod p is being deleted"},
		{"another uid", pod, "u2", "Precondition failed: UID in precondition: u2"},
	} {
		bb := *b
		bb.UID = tt.uid
		if _, err := Bind(tt.pod, &bb, now); !api.IsConflict(err) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want a Conflict with %q", tt.name, err, tt.want)
		}
	}
	if err := ValidateBinding(&api.Binding{Target: api.ObjectReference{Kind: "Pod"}}); err == nil ||
		!strings.Contains(err.Error(), "metadata.name") || !strings.Contains(err.Error(), "target.name") || !strings.Contains(err.Error(), "target.kind") {
		t.Errorf("ValidateBinding: %v; want every problem named", err)
	}
}

// A delete's resourceVersion precondition is compared as given (409, with
// Kubernetes' words); an update's says the object was modified.
func TestPreconditions(t *testing.T) {
	k := api.MustKindOf(&api.ConfigMap{})
	cur := &api.ConfigMap{ObjectMeta: api.ObjectMeta{Name: "c", UID: "u", ResourceVersion: "7"}}
	if err := CheckDeletePrecondition(k, cur, "", "07"); !api.IsConflict(err) || !strings.Contains(err.Error(), "ResourceVersion in precondition: 07, ResourceVersion in object meta: 7") {
		t.Errorf("delete: %v", err)
	}
	if err := CheckPrecondition(k, cur, "", "6"); !api.IsConflict(err) || !strings.Contains(err.Error(), "the object has been modified") {
		t.Errorf("update: %v", err)
	}
	if err := CheckDeletePrecondition(k, cur, "u", "7"); err != nil {
		t.Errorf("matching: %v", err)
	}
}
