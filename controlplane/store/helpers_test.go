package store

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"skiff.dev/skiff/api"
)

var (
	podKind  = api.MustKindOf(&api.Pod{})
	cmKind   = api.MustKindOf(&api.ConfigMap{})
	nodeKind = api.MustKindOf(&api.Node{})
	evKind   = api.MustKindOf(&api.Event{})
)

// openStore opens a store in a temporary directory, closed by t.Cleanup.
// It returns the store and its path (to reopen it).
func openStore(tb testing.TB, opts Options) (*Bolt, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "skiff.db")
	return reopen(tb, path, opts), path
}

func reopen(tb testing.TB, path string, opts Options) *Bolt {
	tb.Helper()
	s, err := Open(path, opts)
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// testOptions are the defaults without fsync: the tests check logic, not
// durability (the benchmarks fsync).
func testOptions() Options {
	o := DefaultOptions()
	o.NoSync = true
	return o
}

func newPod(ns, name string) *api.Pod {
	return &api.Pod{
		ObjectMeta: api.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "web"}},
		Spec:       api.PodSpec{Containers: []api.Container{{Name: "c", Image: "nginx:1.27"}}},
	}
}

func mustCreate(tb testing.TB, s Store, obj api.Object) api.Object {
	tb.Helper()
	out, err := s.Create(context.Background(), obj)
	if err != nil {
		tb.Fatalf("create %s: %v", api.KeyOf(obj), err)
	}
	return out
}

func rvOf(o api.Object) string { return o.GetObjectMeta().ResourceVersion }

func revOf(tb testing.TB, o api.Object) int64 {
	tb.Helper()
	var n int64
	if _, err := fmt.Sscan(rvOf(o), &n); err != nil {
		tb.Fatalf("resourceVersion %q: %v", rvOf(o), err)
	}
	return n
}

// next receives one event or fails after a deadline.
func next(tb testing.TB, ch <-chan Event) Event {
	tb.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			tb.Fatal("watch channel closed, want an event")
		}
		return e
	case <-time.After(5 * time.Second):
		tb.Fatal("no watch event within 5s")
	}
	return Event{}
}

// expectNext receives one event and checks its type, name and revision.
func expectNext(tb testing.TB, ch <-chan Event, typ api.WatchEventType, name string) Event {
	tb.Helper()
	e := next(tb, ch)
	if e.Type != typ || e.Object.GetObjectMeta().Name != name {
		tb.Fatalf("event = %s %s (rev %d), want %s %s", e.Type, e.Object.GetObjectMeta().Name, e.Revision, typ, name)
	}
	if got := rvOf(e.Object); got != fmt.Sprint(e.Revision) {
		tb.Fatalf("event object resourceVersion %s, event revision %d", got, e.Revision)
	}
	return e
}
