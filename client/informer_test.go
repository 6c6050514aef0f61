package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/internal/testwait"
)

func testPod(ns, name, node string, labels map[string]string) *api.Pod {
	return &api.Pod{
		ObjectMeta: api.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       api.PodSpec{NodeName: node, Containers: []api.Container{{Name: "c", Image: "nginx:1.27"}}},
	}
}

// changeLog records handler calls as "add ns/a", "update ns/a", "delete ns/a".
type changeLog struct {
	mu  sync.Mutex
	log []string
}

func (c *changeLog) handler() client.Handler {
	add := func(s string) { c.mu.Lock(); defer c.mu.Unlock(); c.log = append(c.log, s) }
	return client.Handler{
		OnAdd:    func(o api.Object) { add("add " + api.KeyOf(o)) },
		OnUpdate: func(_, o api.Object) { add("update " + api.KeyOf(o)) },
		OnDelete: func(o api.Object) { add("delete " + api.KeyOf(o)) },
	}
}

func (c *changeLog) has(s string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.log, s)
}

func (c *changeLog) snapshot() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.log...)
}

func startInformer(t *testing.T, inf *client.Informer) {
	t.Helper()
	client.SetInformerBackoff(inf, time.Millisecond, 5*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); inf.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("informer did not stop")
		}
	})
	wctx, wcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer wcancel()
	if !inf.WaitForSync(wctx) {
		t.Fatal("informer did not sync")
	}
}

func TestInformerFollowsChanges(t *testing.T) {
	ctx := t.Context()
	f := fake.New(testPod("default", "a", "n1", map[string]string{"app": "web"}))
	pods := kind(t, &api.Pod{})
	inf := client.NewInformer(f, pods, "", api.ListOptions{}, nil)
	var cl changeLog
	inf.AddHandler(cl.handler())
	inf.AddIndex("node", func(o api.Object) []string { return []string{o.(*api.Pod).Spec.NodeName} })
	if inf.HasSynced() {
		t.Fatal("synced before Run")
	}
	startInformer(t, inf)
	if !cl.has("add default/a") {
		t.Fatalf("initial list not seen: %v", cl.snapshot())
	}

	b, err := client.Create(ctx, f, testPod("default", "b", "n2", map[string]string{"app": "db"}))
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "add b", func() bool { return cl.has("add default/b") })

	b.Labels["app"] = "web"
	if _, err := client.Update(ctx, f, b); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "update b", func() bool { return cl.has("update default/b") })
	sel, _ := api.ParseSelector("app=web")
	if got := keys(inf.ListBy(sel, "default")); !slices.Equal(got, []string{"default/a", "default/b"}) {
		t.Errorf("ListBy app=web = %v", got)
	}
	if got := keys(inf.ByIndex("node", "n2")); !slices.Equal(got, []string{"default/b"}) {
		t.Errorf("ByIndex node=n2 = %v", got)
	}

	if err := f.Delete(ctx, pods, "default", "a", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "delete a", func() bool { return cl.has("delete default/a") })
	if _, ok := inf.Get("default", "a"); ok {
		t.Error("deleted pod still cached")
	}
	if got := inf.ByIndex("node", "n1"); len(got) != 0 {
		t.Errorf("index still holds deleted pod: %v", keys(got))
	}
	if inf.LastSyncResourceVersion() != f.ResourceVersion() {
		t.Errorf("LastSyncResourceVersion = %s, want %s", inf.LastSyncResourceVersion(), f.ResourceVersion())
	}

	// A watch that ends normally resumes from the last resourceVersion:
	// nothing is replayed, nothing is missed.
	f.CloseWatches()
	if _, err := client.Create(ctx, f, testPod("default", "c", "", nil)); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "add c after reconnect", func() bool { return cl.has("add default/c") })
	if n := countPrefix(cl.snapshot(), "add default/b"); n != 1 {
		t.Errorf("b added %d times after reconnect, want once", n)
	}
	testwait.For(t, 10*time.Second, "one watch open", func() bool { return f.WatchCount() == 1 })
}

func TestInformerRelistsAfterGone(t *testing.T) {
	ctx := t.Context()
	f := fake.New(
		testPod("default", "keep", "", nil),
		testPod("default", "change", "", nil),
		testPod("default", "vanish", "", nil),
	)
	pods := kind(t, &api.Pod{})
	inf := client.NewInformer(f, pods, "default", api.ListOptions{}, nil)
	var cl changeLog
	inf.AddHandler(cl.handler())
	startInformer(t, inf)
	testwait.For(t, 10*time.Second, "watching", func() bool { return f.WatchCount() == 1 })

	// Cut the informer off: its watch ends and new watches fail, so it
	// misses the next changes, as it would while the server restarts.
	errDown := errors.New("server down")
	f.Intercept(func(a fake.Action) error {
		if a.Verb == "watch" || a.Verb == "list" {
			return errDown
		}
		return nil
	})
	f.CloseWatches()
	if err := f.Delete(ctx, pods, "default", "vanish", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := client.Get[*api.Pod](ctx, f, "default", "change")
	if err != nil {
		t.Fatal(err)
	}
	p.Labels = map[string]string{"changed": "yes"}
	if _, err := client.Update(ctx, f, p); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Create(ctx, f, testPod("default", "new", "", nil)); err != nil {
		t.Fatal(err)
	}
	// The history the informer would resume from is gone: it must relist.
	f.ExpireWatches()
	f.Intercept(nil)

	for _, want := range []string{"delete default/vanish", "update default/change", "add default/new"} {
		testwait.For(t, 10*time.Second, want, func() bool { return cl.has(want) })
	}
	if cl.has("update default/keep") || countPrefix(cl.snapshot(), "add default/keep") != 1 {
		t.Errorf("unchanged object reported again: %v", cl.snapshot())
	}
	if got := keys(inf.List()); !slices.Equal(got, []string{"default/change", "default/keep", "default/new"}) {
		t.Errorf("cache = %v", got)
	}
	if o, _ := inf.Get("default", "change"); o.GetObjectMeta().Labels["changed"] != "yes" {
		t.Errorf("cache holds a stale object: %+v", o.GetObjectMeta())
	}
}

func TestMustRelist(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"410 Gone", api.NewStatusError(http.StatusGone, api.ReasonGone, "too old resource version: 1 (5)"), true},
		{"410 Expired", api.NewGone("too old resource version: 1 (5)"), true},
		{"504 too large resource version", api.NewTooLargeResourceVersion(90, 12, 1), true},
		{"wrapped", fmt.Errorf("watch pods: %w", api.NewTooLargeResourceVersion(90, 12, 1)), true},
		{"504 Timeout for another reason", api.NewStatusError(http.StatusGatewayTimeout, api.ReasonTimeout, "the server was unable to return a response in the time allotted"), false},
		{"the cause on another reason", &api.StatusError{Status: api.Status{Reason: api.ReasonInternal, Details: &api.StatusDetails{Causes: []api.StatusCause{{Type: api.CauseResourceVersionTooLarge}}}}}, false},
		{"500", api.NewInternal(errors.New("boom")), false},
		{"not a Status", errors.New("connection refused"), false},
		{"no error", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := client.MustRelist(tc.err); got != tc.want {
				t.Errorf("mustRelist(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// A watch answered "Too large resource version" cannot resume from that
// version however often it retries: the informer must list again, as it
// does after 410 Gone.
func TestInformerRelistsAfterTooLargeResourceVersion(t *testing.T) {
	ctx := t.Context()
	f := fake.New(testPod("default", "keep", "", nil), testPod("default", "vanish", "", nil))
	pods := kind(t, &api.Pod{})
	inf := client.NewInformer(f, pods, "default", api.ListOptions{}, nil)
	var cl changeLog
	inf.AddHandler(cl.handler())
	startInformer(t, inf)
	testwait.For(t, 10*time.Second, "watching", func() bool { return f.WatchCount() == 1 })

	// From now on every watch is refused as the server would refuse
	// one from a version it has not reached; lists still work, so
	// only a relist can show the informer what changes next.
	var mu sync.Mutex
	lists := 0
	f.Intercept(func(a fake.Action) error {
		switch a.Verb {
		case "watch":
			return api.NewTooLargeResourceVersion(90, 12, 1)
		case "list":
			mu.Lock()
			lists++
			mu.Unlock()
		}
		return nil
	})
	f.CloseWatches()
	if err := f.Delete(ctx, pods, "default", "vanish", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Create(ctx, f, testPod("default", "new", "", nil)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"delete default/vanish", "add default/new"} {
		testwait.For(t, 10*time.Second, want, func() bool { return cl.has(want) })
	}
	mu.Lock()
	n := lists
	mu.Unlock()
	if n == 0 {
		t.Error("the changes arrived without a list")
	}
	f.Intercept(nil)
	testwait.For(t, 10*time.Second, "watching again", func() bool { return f.WatchCount() == 1 })
	if got := keys(inf.List()); !slices.Equal(got, []string{"default/keep", "default/new"}) {
		t.Errorf("cache = %v", got)
	}
}

func TestInformerSelectors(t *testing.T) {
	ctx := t.Context()
	f := fake.New()
	pods := kind(t, &api.Pod{})
	inf := client.NewInformer(f, pods, "", api.ListOptions{FieldSelector: "spec.nodeName=n1"}, nil)
	var cl changeLog
	inf.AddHandler(cl.handler())
	startInformer(t, inf)
	p, err := client.Create(ctx, f, testPod("default", "p", "", nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Bind(ctx, &api.Binding{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: "p"}, Target: api.ObjectReference{Kind: "Node", Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	// The pod enters the selection when bound: the agent of n1 sees an add.
	testwait.For(t, 10*time.Second, "bound pod added", func() bool { return cl.has("add default/p") })
	if _, ok := inf.Get(p.Namespace, p.Name); !ok {
		t.Error("bound pod not cached")
	}
}

func keys(objs []api.Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = api.KeyOf(o)
	}
	return out
}

func countPrefix(log []string, s string) int {
	n := 0
	for _, l := range log {
		if l == s {
			n++
		}
	}
	return n
}
