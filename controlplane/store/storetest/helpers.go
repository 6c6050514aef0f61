package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/store"
)

// Kinds the suite writes.
var (
	PodKind  = api.MustKindOf(&api.Pod{})
	CMKind   = api.MustKindOf(&api.ConfigMap{})
	NodeKind = api.MustKindOf(&api.Node{})
	EvKind   = api.MustKindOf(&api.Event{})
)

// NewPod is a small pod labelled app=web.
func NewPod(ns, name string) *api.Pod {
	return &api.Pod{
		ObjectMeta: api.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "web"}},
		Spec:       api.PodSpec{Containers: []api.Container{{Name: "c", Image: "nginx:1.27"}}},
	}
}

// NewEvent is an Event in namespace default; a zero last leaves
// lastTimestamp unset.
func NewEvent(name string, last time.Time) *api.Event {
	e := &api.Event{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: name}, Reason: "Test"}
	if !last.IsZero() {
		e.LastTimestamp = api.NewTime(last)
	}
	return e
}

// MustCreate creates obj or fails tb.
func MustCreate(tb testing.TB, s store.Store, obj api.Object) api.Object {
	tb.Helper()
	out, err := s.Create(context.Background(), obj)
	if err != nil {
		tb.Fatalf("create %s: %v", api.KeyOf(obj), err)
	}
	return out
}

// RV is o's resourceVersion.
func RV(o api.Object) string { return o.GetObjectMeta().ResourceVersion }

// Rev is o's resourceVersion as a revision.
func Rev(tb testing.TB, o api.Object) int64 {
	tb.Helper()
	n, err := store.ParseRevision(RV(o))
	if err != nil {
		tb.Fatalf("resourceVersion %q: %v", RV(o), err)
	}
	return n
}

// Next receives one event or fails after a deadline.
func Next(tb testing.TB, ch <-chan store.Event) store.Event {
	tb.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			tb.Fatal("watch channel closed, want an event")
		}
		return e
	case <-time.After(10 * time.Second):
		tb.Fatal("no watch event within 10s")
	}
	return store.Event{}
}

// ExpectNext receives one event and checks its type and name, and that
// its object's resourceVersion is its revision.
func ExpectNext(tb testing.TB, ch <-chan store.Event, typ api.WatchEventType, name string) store.Event {
	tb.Helper()
	e := Next(tb, ch)
	if e.Type != typ || e.Object.GetObjectMeta().Name != name {
		tb.Fatalf("event = %s %s (rev %d), want %s %s", e.Type, e.Object.GetObjectMeta().Name, e.Revision, typ, name)
	}
	if got := RV(e.Object); got != fmt.Sprint(e.Revision) {
		tb.Fatalf("event object resourceVersion %s, event revision %d", got, e.Revision)
	}
	return e
}
