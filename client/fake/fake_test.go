package fake_test

import (
	"slices"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/clienttest"
	"skiff.dev/skiff/client/fake"
)

func pod(name string) *api.Pod {
	return &api.Pod{
		ObjectMeta: api.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}},
		Spec:       api.PodSpec{Containers: []api.Container{{Name: "c", Image: "nginx:1.27"}}},
	}
}

// New keeps its fixtures as given (status included), filling in only the
// metadata the server would have set.
func TestNewKeepsFixtures(t *testing.T) {
	p := pod("web")
	p.Status.Phase = api.PodRunning
	f := fake.New(p)
	got, err := client.Get[*api.Pod](t.Context(), f, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != api.PodRunning || got.UID == "" || got.ResourceVersion != "1" || got.Generation != 1 || got.CreationTimestamp.IsZero() {
		t.Errorf("fixture = %+v %+v", got.ObjectMeta, got.Status)
	}
	if p.UID != "" {
		t.Error("New changed its argument")
	}
}

// By default the fake plays the nodes' agents: a graceful pod delete is
// seen as MODIFIED (deletionTimestamp) then DELETED, and the pod is gone.
func TestStopPodsAtOnce(t *testing.T) {
	ctx := t.Context()
	p := pod("web")
	p.Spec.NodeName = "n1"
	f := fake.New(p)
	pk := api.MustKindOf(&api.Pod{})
	w, err := f.Watch(ctx, pk, "", api.ListOptions{ResourceVersion: f.ResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := f.Delete(ctx, pk, "default", "web", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []api.WatchEventType{api.Modified, api.Deleted} {
		select {
		case ev := <-w.Events():
			if ev.Type != want || ev.Object.GetObjectMeta().DeletionTimestamp == nil {
				t.Fatalf("event %s (deletionTimestamp %v), want %s with one", ev.Type, ev.Object.GetObjectMeta().DeletionTimestamp, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s event", want)
		}
	}
	if _, err := client.Get[*api.Pod](ctx, f, "default", "web"); !api.IsNotFound(err) {
		t.Errorf("get after delete: %v, want NotFound", err)
	}
}

// Intercept fails any call; the write attempt is still recorded.
func TestInterceptAndActions(t *testing.T) {
	ctx := t.Context()
	f := fake.New()
	boom := api.NewConflict(api.MustKindOf(&api.Pod{}), "web", "injected")
	f.Intercept(func(a fake.Action) error {
		if a.Verb == "create" && a.Kind == "Pod" {
			return boom
		}
		return nil
	})
	if _, err := client.Create(ctx, f, pod("web")); err != boom {
		t.Errorf("create: %v, want the injected error", err)
	}
	if _, _, err := f.List(ctx, api.MustKindOf(&api.Pod{}), "", api.ListOptions{}); err != nil {
		t.Errorf("list: %v", err)
	}
	f.Intercept(nil)
	g := pod("")
	g.GenerateName = "web-"
	first, err := client.Create(ctx, f, g)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range f.Actions() {
		got = append(got, a.String())
	}
	if want := []string{"create Pod default/web", "create Pod default/"}; !slices.Equal(got, want) {
		t.Errorf("actions = %q, want %q (reads are not recorded)", got, want)
	}
	// Generated names are deterministic: a second fake gives the same one.
	again, err := client.Create(ctx, fake.New(), g)
	if err != nil || again.Name != first.Name {
		t.Errorf("generated names %q and %q (%v), want equal", first.Name, again.Name, err)
	}
}

func TestBindScaleTrace(t *testing.T) {
	ctx := t.Context()
	f := fake.New(pod("web"), clienttest.Deployment("d", 3))
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
	w3, err := f.Watch(ctx, pk, "", api.ListOptions{ResourceVersion: rv})
	if err != nil {
		t.Fatalf("watch from compacted rv: %v, want a watcher that ends with Gone", err)
	}
	for range w3.Events() {
	}
	if !api.IsGone(w3.Err()) {
		t.Errorf("watch from compacted rv: Err = %v, want Gone", w3.Err())
	}
}
