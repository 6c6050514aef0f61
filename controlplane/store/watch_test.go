package store_test

import (
	"context"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/store"
	"skiff.dev/skiff/controlplane/store/storetest"
)

// Watchers of one live change share one decoded object (one copy in
// memory however many informers a process runs); a watcher replaying the
// history decodes its own, so the history never pins decoded objects.
func TestWatchersShareTheDecodedObjectOfALiveChange(t *testing.T) {
	s, _ := openStore(t, testOptions())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	storetest.MustCreate(t, s, &api.ConfigMap{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: "before"}})
	rev := s.Revision() // > 0: a replay from here (0 would mean "from now")
	live := make([]<-chan store.Event, 3)
	for i := range live {
		ch, err := s.Watch(ctx, storetest.PodKind, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		live[i] = ch
	}
	storetest.MustCreate(t, s, storetest.NewPod("default", "web"))
	replay, err := s.Watch(ctx, storetest.PodKind, "", rev)
	if err != nil {
		t.Fatal(err)
	}

	recv := func(ch <-chan store.Event) api.Object {
		t.Helper()
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("watch closed before its event")
			}
			if ev.Type != api.Added || api.KeyOf(ev.Object) != "default/web" {
				t.Fatalf("event %s %s, want ADDED default/web", ev.Type, api.KeyOf(ev.Object))
			}
			return ev.Object
		case <-ctx.Done():
			t.Fatal("no event")
		}
		return nil
	}
	first := recv(live[0])
	for i, ch := range live[1:] {
		if got := recv(ch); got != first {
			t.Errorf("live watcher %d got its own copy, want the shared object", i+1)
		}
	}
	if got := recv(replay); got == first {
		t.Error("replayed event shares the live object, want a copy of its own")
	} else if storetest.RV(got) != storetest.RV(first) {
		t.Errorf("replayed resourceVersion %s, want %s", storetest.RV(got), storetest.RV(first))
	}
}
