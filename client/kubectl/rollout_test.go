package kubectl

import (
	"errors"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
)

// A DaemonSet with two revisions (as its controller leaves them): history
// lists them, undo puts revision 1's template back, a second undo to the
// same revision is skipped, restart stamps the template.
func TestDaemonSetHistoryUndoRestart(t *testing.T) {
	ctx := t.Context()
	ds := &api.DaemonSet{
		ObjectMeta: api.ObjectMeta{Name: "agent", Namespace: "default", UID: "ds-uid"},
		Spec: api.DaemonSetSpec{
			Selector: &api.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: api.PodTemplateSpec{ObjectMeta: api.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec: api.PodSpec{Containers: []api.Container{{Name: "agent", Image: "agent:2"}}}},
		},
	}
	rev := func(n int64, image, cause string) *api.ControllerRevision {
		t := api.Clone(ds).Spec.Template
		t.Spec.Containers[0].Image = image
		api.SetDefaults(&api.DaemonSet{Spec: api.DaemonSetSpec{Template: t}})
		data, err := api.RevisionPatch(&t)
		if err != nil {
			panic(err)
		}
		yes := true
		r := &api.ControllerRevision{ObjectMeta: api.ObjectMeta{Name: "agent-" + image[len(image)-1:], Namespace: "default",
			OwnerReferences: []api.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "ds-uid", Controller: &yes}}},
			Data: data, Revision: n}
		if cause != "" {
			r.Annotations = map[string]string{api.AnnotationChangeCause: cause}
		}
		return r
	}
	c := fake.New(ds, rev(2, "agent:2", ""), rev(1, "agent:1", "first"))
	k := api.MustKindOf(ds)
	obj, err := c.Get(ctx, k, "default", "agent")
	if err != nil {
		t.Fatal(err)
	}
	hist, err := History(ctx, c, obj)
	if err != nil || len(hist) != 2 || hist[0].Number != 1 || hist[0].ChangeCause != "first" || hist[1].Template.Spec.Containers[0].Image != "agent:2" {
		t.Fatalf("history %+v (%v)", hist, err)
	}
	if err := Undo(ctx, c, k, "default", "agent", 0); err != nil {
		t.Fatalf("undo: %v", err)
	}
	got, _ := client.Get[*api.DaemonSet](ctx, c, "default", "agent")
	if img := got.Spec.Template.Spec.Containers[0].Image; img != "agent:1" {
		t.Errorf("after undo: image %s, want agent:1", img)
	}
	err = Undo(ctx, c, k, "default", "agent", 1)
	if !errors.Is(err, ErrSkipped) || err.Error() != "skipped rollback (current template already matches revision 1)" {
		t.Errorf("second undo: %v", err)
	}
	if err := Undo(ctx, c, k, "default", "agent", 7); err == nil || err.Error() != "unable to find specified revision 7 in history" {
		t.Errorf("undo to a missing revision: %v", err)
	}
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	if err := Restart(ctx, c, k, "default", "agent", now); err != nil {
		t.Fatal(err)
	}
	got, _ = client.Get[*api.DaemonSet](ctx, c, "default", "agent")
	if a := got.Spec.Template.Annotations[api.AnnotationRestartedAt]; a != "2025-03-01T12:00:00Z" {
		t.Errorf("restartedAt %q", a)
	}
}

func TestRolloutStatusMessages(t *testing.T) {
	ds := &api.DaemonSet{ObjectMeta: api.ObjectMeta{Name: "agent", Generation: 2}}
	ds.Spec.UpdateStrategy.Type = api.RollingUpdate
	ds.Status = api.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 1, NumberAvailable: 3}
	msg, done, err := RolloutStatus(ds)
	if err != nil || done || msg != "Waiting for daemon set \"agent\" rollout to finish: 1 out of 3 new pods have been updated...\n" {
		t.Errorf("%q %v %v", msg, done, err)
	}
	ds.Status.UpdatedNumberScheduled = 3
	if msg, done, _ := RolloutStatus(ds); !done || msg != "daemon set \"agent\" successfully rolled out\n" {
		t.Errorf("%q %v", msg, done)
	}
	ds.Spec.UpdateStrategy.Type = api.OnDelete
	if _, _, err := RolloutStatus(ds); err == nil || err.Error() != "rollout status is only available for RollingUpdate strategy type" {
		t.Errorf("OnDelete: %v", err)
	}
	three, zero := int32(3), int32(0)
	ss := &api.StatefulSet{ObjectMeta: api.ObjectMeta{Name: "web", Generation: 1}}
	ss.Spec.Replicas = &three
	ss.Spec.UpdateStrategy = api.StatefulSetUpdateStrategy{Type: api.RollingUpdate, RollingUpdate: &api.RollingUpdateStatefulSetStrategy{Partition: &zero}}
	ss.Status = api.StatefulSetStatus{ObservedGeneration: 1, ReadyReplicas: 1}
	if msg, _, _ := RolloutStatus(ss); msg != "Waiting for 2 pods to be ready...\n" {
		t.Errorf("%q", msg)
	}
	ss.Status.ReadyReplicas, ss.Status.UpdatedReplicas = 3, 3
	if msg, done, _ := RolloutStatus(ss); !done || !strings.HasPrefix(msg, "partitioned roll out complete: 3 new pods") {
		t.Errorf("%q %v", msg, done)
	}
}
