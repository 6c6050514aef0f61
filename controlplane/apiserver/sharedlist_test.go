package apiserver

import (
	"context"
	"testing"

	"skiff.dev/skiff/api"
)

// TestListSharedSeesEveryWrite: a list admission keeps (listShared) is
// served again while nothing of its kind and namespace was written, and
// every write, a create, an update or a delete in that namespace, is seen
// by the next pod create: a LimitRange's defaults, a PriorityClass made
// the global default. A write in another namespace leaves it kept.
func TestListSharedSeesEveryWrite(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ensureNamespace(t, e, ctx, "lab")
	ensureNamespace(t, e, ctx, "other")
	create := func(o api.Object) api.Object {
		t.Helper()
		out, err := e.local.Create(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	pod := func(name string) *api.Pod {
		t.Helper()
		return create(nginx("lab", name)).(*api.Pod)
	}
	memory := func(p *api.Pod) string {
		q := p.Spec.Containers[0].Resources.Limits["memory"]
		return q.String()
	}

	if p := pod("first"); memory(p) != "0" || p.Spec.Priority == nil || *p.Spec.Priority != 0 {
		t.Fatalf("no LimitRange, no default class: memory limit %s, priority %v", memory(p), p.Spec.Priority)
	}
	kept, _, ok := e.reg.kept(limitRangeKind, "lab")
	if !ok || len(kept) != 0 {
		t.Fatalf("after a pod create: the namespace's LimitRanges kept %v (%v), want an empty list", kept, ok)
	}
	again, _, err := e.reg.listShared(ctx, limitRangeKind, "lab")
	if err != nil || len(again) != 0 {
		t.Fatalf("listShared = %v, %v", again, err)
	}

	create(&api.LimitRange{ObjectMeta: api.ObjectMeta{Name: "defaults", Namespace: "other"}, Spec: api.LimitRangeSpec{Limits: []api.LimitRangeItem{
		{Type: api.LimitTypeContainer, Default: quantities("memory", "64Mi")}}}})
	if _, _, ok := e.reg.kept(limitRangeKind, "lab"); !ok {
		t.Fatal("a LimitRange in another namespace dropped this one's list")
	}
	lr := create(&api.LimitRange{ObjectMeta: api.ObjectMeta{Name: "defaults", Namespace: "lab"}, Spec: api.LimitRangeSpec{Limits: []api.LimitRangeItem{
		{Type: api.LimitTypeContainer, Default: quantities("memory", "256Mi")}}}}).(*api.LimitRange)
	if p := pod("created"); memory(p) != "256Mi" {
		t.Fatalf("after the LimitRange's create: memory limit %s, want 256Mi", memory(p))
	}
	lr = api.Clone(lr)
	lr.Spec.Limits[0].Default = quantities("memory", "512Mi")
	if _, err := e.local.Update(ctx, lr); err != nil {
		t.Fatal(err)
	}
	if p := pod("updated"); memory(p) != "512Mi" {
		t.Fatalf("after the LimitRange's update: memory limit %s, want 512Mi", memory(p))
	}
	if err := e.local.Delete(ctx, limitRangeKind, "lab", "defaults", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if p := pod("deleted"); memory(p) != "0" {
		t.Fatalf("after the LimitRange's delete: memory limit %s, want none", memory(p))
	}

	create(&api.PriorityClass{ObjectMeta: api.ObjectMeta{Name: "lab-default"}, Value: 7, GlobalDefault: true})
	if p := pod("prioritized"); p.Spec.PriorityClassName != "lab-default" || p.Spec.Priority == nil || *p.Spec.Priority != 7 {
		t.Fatalf("after a global default class: class %q, priority %v", p.Spec.PriorityClassName, p.Spec.Priority)
	}
}
