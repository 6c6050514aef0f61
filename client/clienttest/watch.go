package clienttest

import (
	"slices"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// The suite's list and watch tests: selectors, resume, 410 Gone,
// timeouts.

func (s *suite) testList(t *testing.T) {
	c := s.tg.New(t)
	ctx := t.Context()
	mustCreate(t, c, newNamespace("other"))
	for _, p := range []struct{ ns, name, app string }{
		{"default", "a", "web"}, {"default", "b", "db"}, {"other", "c", "web"},
	} {
		pod := newPod(p.name)
		pod.Namespace, pod.Labels = p.ns, map[string]string{"app": p.app}
		mustCreate(t, c, pod)
	}
	mustBind(t, c, mustGet[*api.Pod](t, c, "default", "b"), "node-1")
	last := mustCreate(t, c, newConfigMap("unrelated", nil))

	cases := []struct {
		name, ns string
		opts     api.ListOptions
		want     []string
	}{
		{"one namespace", "default", api.ListOptions{}, []string{"default/a", "default/b"}},
		{"all namespaces", "", api.ListOptions{}, []string{"default/a", "default/b", "other/c"}},
		{"label selector", "", api.ListOptions{LabelSelector: "app=web"}, []string{"default/a", "other/c"}},
		{"set selector", "", api.ListOptions{LabelSelector: "app in (db),app!=web"}, []string{"default/b"}},
		{"field selector name", "", api.ListOptions{FieldSelector: "metadata.name=c"}, []string{"other/c"}},
		{"field selector node", "", api.ListOptions{FieldSelector: "spec.nodeName=node-1"}, []string{"default/b"}},
		{"unscheduled", "default", api.ListOptions{FieldSelector: "spec.nodeName="}, []string{"default/a"}},
		{"both", "", api.ListOptions{LabelSelector: "app=web", FieldSelector: "metadata.namespace=default"}, []string{"default/a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			items, listRV, err := c.List(ctx, podKind, tc.ns, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range items {
				got = append(got, api.KeyOf(o))
				if o.GetTypeMeta().Kind != "Pod" {
					t.Errorf("%s: kind %q", api.KeyOf(o), o.GetTypeMeta().Kind)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("list = %v, want %v", got, tc.want)
			}
			if parseRV(t, listRV) < rv(t, last) {
				t.Errorf("list resourceVersion %s is older than the last write %s", listRV, last.ResourceVersion)
			}
		})
	}
	for _, opts := range []api.ListOptions{{LabelSelector: "app in (("}, {FieldSelector: "spec.unknown=x"}} {
		_, _, err := c.List(ctx, podKind, "", opts)
		wantReason(t, "bad selector "+opts.LabelSelector+opts.FieldSelector, err, api.ReasonBadRequest)
	}
}

// next returns the watch's next event, failing after waitFor.
func next(t testing.TB, w client.Watcher) client.Event {
	t.Helper()
	select {
	case ev, ok := <-w.Events():
		if !ok {
			t.Fatalf("watch ended early: %v", w.Err())
		}
		return ev
	case <-time.After(waitFor):
		t.Fatal("no watch event")
	}
	return client.Event{}
}

func wantEvent(t testing.TB, w client.Watcher, typ api.WatchEventType, key string) client.Event {
	t.Helper()
	ev := next(t, w)
	if ev.Type != typ || ev.Object == nil || api.KeyOf(ev.Object) != key {
		got := ""
		if ev.Object != nil {
			got = api.KeyOf(ev.Object)
		}
		t.Fatalf("event %s %s, want %s %s", ev.Type, got, typ, key)
	}
	return ev
}

// wantEnd waits for the watch to end and returns its Err.
func wantEnd(t testing.TB, w client.Watcher) error {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				return w.Err()
			}
			t.Errorf("unexpected event %s before the end", ev.Type)
		case <-deadline:
			t.Fatal("watch did not end")
		}
	}
}

func (s *suite) testWatch(t *testing.T) {
	c := s.tg.New(t)
	ctx := t.Context()
	a := mustCreate(t, c, newConfigMap("a", nil))
	mustCreate(t, c, newConfigMap("b", nil))

	w, err := c.Watch(ctx, cmKind, "default", api.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	wantEvent(t, w, api.Added, "default/a")
	wantEvent(t, w, api.Added, "default/b")

	a.Data["k"] = "v2"
	a2, err := client.Update(ctx, c, a)
	if err != nil {
		t.Fatal(err)
	}
	ev := wantEvent(t, w, api.Modified, "default/a")
	if ev.Object.GetObjectMeta().ResourceVersion != a2.ResourceVersion || ev.Object.GetTypeMeta().Kind != "ConfigMap" {
		t.Errorf("modified event: rv %s kind %q, want %s ConfigMap", ev.Object.GetObjectMeta().ResourceVersion, ev.Object.GetTypeMeta().Kind, a2.ResourceVersion)
	}
	if err := c.Delete(ctx, cmKind, "default", "b", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	del := wantEvent(t, w, api.Deleted, "default/b")
	mustCreate(t, c, newConfigMap("c", nil))
	wantEvent(t, w, api.Added, "default/c")
	w.Stop()
	w.Stop() // safe twice
	if err := wantEnd(t, w); err != nil {
		t.Errorf("Err after Stop = %v, want nil", err)
	}

	// Resume after the delete: only what came later.
	r, err := c.Watch(ctx, cmKind, "", api.ListOptions{ResourceVersion: del.Object.GetObjectMeta().ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	wantEvent(t, r, api.Added, "default/c")

	// Other namespaces and kinds are not seen.
	mustCreate(t, c, newNamespace("other"))
	o := newConfigMap("elsewhere", nil)
	o.Namespace = "other"
	ns, err := c.Watch(ctx, cmKind, "default", api.ListOptions{ResourceVersion: del.Object.GetObjectMeta().ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Stop()
	mustCreate(t, c, o)
	mustCreate(t, c, newPod("p"))
	mustCreate(t, c, newConfigMap("d", nil))
	wantEvent(t, ns, api.Added, "default/c")
	wantEvent(t, ns, api.Added, "default/d")
	wantEvent(t, r, api.Added, "other/elsewhere")

	_, err = c.Watch(ctx, cmKind, "", api.ListOptions{ResourceVersion: "abc"})
	wantReason(t, "watch from a bad resourceVersion", err, api.ReasonBadRequest)
}

func (s *suite) testWatchSelector(t *testing.T) {
	c := s.tg.New(t)
	ctx := t.Context()
	a := mustCreate(t, c, newConfigMap("a", map[string]string{"app": "web"}))
	mustCreate(t, c, newConfigMap("b", map[string]string{"app": "db"}))

	w, err := c.Watch(ctx, cmKind, "", api.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	wantEvent(t, w, api.Added, "default/a")

	a.Labels["app"] = "db"
	if _, err := client.Update(ctx, c, a); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, w, api.Deleted, "default/a") // stopped matching

	b := mustGet[*api.ConfigMap](t, c, "default", "b")
	b.Labels["app"] = "web"
	if _, err := client.Update(ctx, c, b); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, w, api.Added, "default/b") // started matching
	mustCreate(t, c, newConfigMap("c", map[string]string{"app": "web"}))
	wantEvent(t, w, api.Added, "default/c")
}

func (s *suite) testWatchGone(t *testing.T) {
	c := s.tg.New(t)
	ctx := t.Context()
	first := mustCreate(t, c, newConfigMap("a", nil))
	mustCreate(t, c, newConfigMap("b", nil)) // first is now an earlier revision
	s.tg.ExpireHistory(t, c)

	w, err := c.Watch(ctx, cmKind, "", api.ListOptions{ResourceVersion: first.ResourceVersion})
	if err != nil {
		t.Fatalf("watch from a compacted revision: %v, want a watcher that ends with Gone", err)
	}
	defer w.Stop()
	if err := wantEnd(t, w); !api.IsGone(err) {
		t.Errorf("Err = %v, want Gone", err)
	}

	// Listing again gives a revision to watch from.
	_, listRV, err := c.List(ctx, cmKind, "", api.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Watch(ctx, cmKind, "", api.ListOptions{ResourceVersion: listRV})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	mustCreate(t, c, newConfigMap("c", nil))
	wantEvent(t, r, api.Added, "default/c")
}

func (s *suite) testWatchTimeout(t *testing.T) {
	c := s.tg.New(t)
	w, err := c.Watch(t.Context(), cmKind, "", api.ListOptions{TimeoutSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := wantEnd(t, w); err != nil {
		t.Errorf("Err after the timeout = %v, want nil (a normal end)", err)
	}
}
