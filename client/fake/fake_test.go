package fake_test

import (
	"slices"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
)

func pod(name string) *api.Pod {
	return &api.Pod{
		ObjectMeta: api.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}},
		Spec:       api.PodSpec{Containers: []api.Container{{Name: "c", Image: "nginx:1.27"}}},
	}
}

func deployment(name string, replicas int32) *api.Deployment {
	labels := map[string]string{"app": name}
	return &api.Deployment{
		ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default"},
		Spec: api.DeploymentSpec{
			Replicas: &replicas,
			Selector: &api.LabelSelector{MatchLabels: labels},
			Template: api.PodTemplateSpec{
				ObjectMeta: api.ObjectMeta{Labels: labels},
				Spec:       api.PodSpec{Containers: []api.Container{{Name: "c", Image: "nginx:1.27"}}},
			},
		},
	}
}

func TestCreateUpdateSemantics(t *testing.T) {
	ctx := t.Context()
	f := fake.New()
	p, err := client.Create(ctx, f, pod("web"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Namespace != "default" || p.UID == "" || p.ResourceVersion == "" || p.Generation != 1 || p.CreationTimestamp.IsZero() {
		t.Fatalf("created metadata = %+v", p.ObjectMeta)
	}
	if _, err := client.Create(ctx, f, pod("web")); !api.IsAlreadyExists(err) {
		t.Errorf("second create: %v, want AlreadyExists", err)
	}
	g := pod("")
	g.GenerateName = "web-"
	gp, err := client.Create(ctx, f, g)
	if err != nil || len(gp.Name) != len("web-")+5 {
		t.Errorf("generateName: %q, %v", gp.Name, err)
	}

	// Update keeps the status; UpdateStatus keeps the spec.
	withStatus := api.Clone(p)
	withStatus.Status.Phase = "Running"
	s, err := client.UpdateStatus(ctx, f, withStatus)
	if err != nil {
		t.Fatal(err)
	}
	if s.Status.Phase != "Running" || s.Generation != 1 {
		t.Errorf("after UpdateStatus: phase %q generation %d", s.Status.Phase, s.Generation)
	}
	// A stale resourceVersion conflicts.
	stale := api.Clone(p)
	stale.Labels["x"] = "y"
	if _, err := client.Update(ctx, f, stale); !api.IsConflict(err) {
		t.Errorf("stale update: %v, want Conflict", err)
	}
	cur := api.Clone(s)
	cur.Status.Phase = "Failed" // ignored by Update
	cur.Spec.Containers[0].Image = "nginx:1.28"
	u, err := client.Update(ctx, f, cur)
	if err != nil {
		t.Fatal(err)
	}
	if u.Status.Phase != "Running" || u.Generation != 2 {
		t.Errorf("after Update: phase %q generation %d", u.Status.Phase, u.Generation)
	}
	// A label change does not bump generation; a no-op writes nothing.
	u.Labels["tier"] = "front"
	l, err := client.Update(ctx, f, u)
	if err != nil || l.Generation != 2 || l.ResourceVersion == u.ResourceVersion {
		t.Errorf("label update: generation %d rv %s->%s, %v", l.Generation, u.ResourceVersion, l.ResourceVersion, err)
	}
	n, err := client.Update(ctx, f, l)
	if err != nil || n.ResourceVersion != l.ResourceVersion {
		t.Errorf("no-op update changed rv %s->%s, %v", l.ResourceVersion, n.ResourceVersion, err)
	}
}

func TestBindScaleTrace(t *testing.T) {
	ctx := t.Context()
	f := fake.New(pod("web"), deployment("d", 3))
	b := &api.Binding{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: "web"}, Target: api.ObjectReference{Kind: "Node", Name: "n1"}}
	if err := f.Bind(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := f.Bind(ctx, b); !api.IsConflict(err) {
		t.Errorf("second bind: %v, want Conflict", err)
	}
	p, _ := client.Get[*api.Pod](ctx, f, "default", "web")
	if p.Spec.NodeName != "n1" {
		t.Errorf("nodeName = %q", p.Spec.NodeName)
	}

	dk := api.MustKindOf(&api.Deployment{})
	s, err := f.GetScale(ctx, dk, "default", "d")
	if err != nil || s.Spec.Replicas != 3 || s.Status.Selector != "app=d" {
		t.Fatalf("scale = %+v, %v", s, err)
	}
	s.Spec.Replicas = 5
	if _, err := f.UpdateScale(ctx, dk, "default", "d", s); err != nil {
		t.Fatal(err)
	}
	if _, err := f.UpdateScale(ctx, dk, "default", "d", s); !api.IsConflict(err) {
		t.Errorf("stale scale: %v, want Conflict", err)
	}
	d, _ := client.Get[*api.Deployment](ctx, f, "default", "d")
	if *d.Spec.Replicas != 5 || d.Generation != 2 {
		t.Errorf("deployment replicas %d generation %d", *d.Spec.Replicas, d.Generation)
	}

	span := api.TraceSpan{Component: "scheduler", Step: "bind", Start: api.MicroTime{Time: time.Now()}}
	if err := f.AddTrace(ctx, "default", "web", span, span); err != nil {
		t.Fatal(err)
	}
	tr, err := f.GetTrace(ctx, "default", "web")
	if err != nil || len(tr.Spans) != 2 || tr.Kind != "PodTrace" {
		t.Errorf("trace = %+v, %v", tr, err)
	}
	if err := f.AddTrace(ctx, "default", "nope", span); !api.IsNotFound(err) {
		t.Errorf("trace of missing pod: %v", err)
	}

	var got []string
	for _, a := range f.Actions() {
		got = append(got, a.String())
	}
	want := []string{
		"create Pod default/web/binding", "create Pod default/web/binding",
		"update Deployment default/d/scale", "update Deployment default/d/scale",
		"create Pod default/web/trace", "create Pod default/nope/trace",
	}
	if !slices.Equal(got, want) {
		t.Errorf("actions = %q\nwant %q", got, want)
	}
}

func TestListWatchSelectors(t *testing.T) {
	ctx := t.Context()
	a, b := pod("a"), pod("b")
	b.Labels = map[string]string{"app": "db"}
	f := fake.New(a, b)
	pk := api.MustKindOf(&api.Pod{})
	objs, rv, err := f.List(ctx, pk, "default", api.ListOptions{LabelSelector: "app=web"})
	if err != nil || len(objs) != 1 || objs[0].GetObjectMeta().Name != "a" {
		t.Fatalf("list = %v, %v", objs, err)
	}
	if _, _, err := f.List(ctx, pk, "", api.ListOptions{FieldSelector: "spec.bogus=1"}); err == nil {
		t.Error("unsupported field selector accepted")
	}

	w, err := f.Watch(ctx, pk, "default", api.ListOptions{LabelSelector: "app=web", ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// b joins the selection, a leaves it, then a is deleted (not seen: it left).
	nb := api.Clone(objs[0].(*api.Pod))
	nb.Labels = map[string]string{"app": "gone"}
	if _, err := f.Update(ctx, nb); err != nil {
		t.Fatal(err)
	}
	bb, _ := client.Get[*api.Pod](ctx, f, "default", "b")
	bb.Labels["app"] = "web"
	if _, err := f.Update(ctx, bb); err != nil {
		t.Fatal(err)
	}
	if err := f.Delete(ctx, pk, "default", "a", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.Delete(ctx, pk, "default", "b", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 3 {
		select {
		case ev := <-w.Events():
			got = append(got, string(ev.Type)+" "+ev.Object.GetObjectMeta().Name)
		case <-time.After(10 * time.Second):
			t.Fatalf("events so far %v", got)
		}
	}
	if want := []string{"DELETED a", "ADDED b", "DELETED b"}; !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}

	// Replay from an old revision, then Gone once the history is dropped.
	w2, err := f.Watch(ctx, pk, "", api.ListOptions{ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-w2.Events(); ev.Type != api.Modified {
		t.Errorf("replay starts with %s", ev.Type)
	}
	f.ExpireWatches()
	for range w2.Events() {
	}
	if !api.IsGone(w2.Err()) {
		t.Errorf("expired watch Err = %v, want Gone", w2.Err())
	}
	if _, err := f.Watch(ctx, pk, "", api.ListOptions{ResourceVersion: rv}); !api.IsGone(err) {
		t.Errorf("watch from compacted rv: %v, want Gone", err)
	}
}

func TestFinalizersDelayDelete(t *testing.T) {
	ctx := t.Context()
	p := pod("web")
	p.Finalizers = []string{"skiff.dev/test"}
	f := fake.New(p)
	pk := api.MustKindOf(&api.Pod{})
	if err := f.Delete(ctx, pk, "default", "web", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := client.Get[*api.Pod](ctx, f, "default", "web")
	if err != nil || got.DeletionTimestamp == nil {
		t.Fatalf("after delete: %+v, %v", got, err)
	}
	got.Finalizers = nil
	if _, err := client.Update(ctx, f, got); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Get[*api.Pod](ctx, f, "default", "web"); !api.IsNotFound(err) {
		t.Errorf("after last finalizer: %v, want NotFound", err)
	}
	if err := f.Delete(ctx, pk, "default", "web", api.DeleteOptions{}); !api.IsNotFound(err) {
		t.Errorf("delete missing: %v, want NotFound", err)
	}
}
