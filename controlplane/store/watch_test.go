package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"skiff.dev/skiff/api"
)

func TestWatchFromNow(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t, testOptions())
	mustCreate(t, s, newPod("default", "before")) // not seen: before the watch
	ch, err := s.Watch(ctx, podKind, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	p := mustCreate(t, s, newPod("default", "web"))
	p.GetObjectMeta().Labels["v"] = "2"
	if _, err := s.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	del, err := s.Delete(ctx, podKind, "default", "web", nil)
	if err != nil {
		t.Fatal(err)
	}
	expectNext(t, ch, api.Added, "web")
	if e := expectNext(t, ch, api.Modified, "web"); e.Object.GetObjectMeta().Labels["v"] != "2" {
		t.Fatalf("modified object labels = %v", e.Object.GetObjectMeta().Labels)
	}
	if e := expectNext(t, ch, api.Deleted, "web"); rvOf(e.Object) != rvOf(del) || e.Revision != 4 {
		t.Fatalf("deleted event rev %d rv %s, want 4", e.Revision, rvOf(e.Object))
	}
}

func TestWatchReplay(t *testing.T) {
	ctx := context.Background()
	opts := testOptions()
	opts.HistorySize = 5
	s, _ := openStore(t, opts)
	for i := range 8 {
		mustCreate(t, s, newPod("default", fmt.Sprintf("p%d", i))) // revisions 1..8; history keeps 4..8
	}
	tests := []struct {
		rev      int64
		gone     bool
		wantFrom int // first pod replayed
	}{
		{rev: 1, gone: true},
		{rev: 2, gone: true},
		{rev: 3, wantFrom: 3},
		{rev: 6, wantFrom: 6},
		{rev: 8, wantFrom: 8}, // nothing to replay
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint("from ", tt.rev), func(t *testing.T) {
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			ch, err := s.Watch(wctx, podKind, "default", tt.rev)
			if tt.gone {
				if !api.IsGone(err) || api.CodeOf(err) != 410 {
					t.Fatalf("err = %v, want 410 Gone", err)
				}
				want := fmt.Sprintf("too old resource version: %d (3)", tt.rev)
				if err.Error() != want {
					t.Fatalf("message %q, want %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := tt.wantFrom; i < 8; i++ {
				if e := expectNext(t, ch, api.Added, fmt.Sprintf("p%d", i)); e.Revision != int64(i+1) {
					t.Fatalf("revision %d, want %d", e.Revision, i+1)
				}
			}
			// Then live events follow the replay without a gap.
			cancel()
		})
	}
	// A watcher that replays and then sees live events.
	ch, err := s.Watch(ctx, podKind, "default", 7)
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, newPod("default", "live"))
	expectNext(t, ch, api.Added, "p7")
	expectNext(t, ch, api.Added, "live")
}

func TestWatchGoneAfterReopen(t *testing.T) {
	ctx := context.Background()
	s, path := openStore(t, testOptions())
	for i := range 3 {
		mustCreate(t, s, newPod("default", fmt.Sprintf("p%d", i)))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, path, testOptions())
	if _, err := s.Watch(ctx, podKind, "", 2); !api.IsGone(err) {
		t.Fatalf("watch from 2 after reopen at 3: %v, want Gone", err)
	}
	ch, err := s.Watch(ctx, podKind, "", 3)
	if err != nil {
		t.Fatalf("watch from the current revision: %v", err)
	}
	mustCreate(t, s, newPod("default", "p3"))
	if e := expectNext(t, ch, api.Added, "p3"); e.Revision != 4 {
		t.Fatalf("revision %d, want 4", e.Revision)
	}
}

func TestWatchFilters(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t, testOptions())
	inA, err := s.Watch(ctx, podKind, "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	all, err := s.Watch(ctx, podKind, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := s.Watch(ctx, nodeKind, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, newPod("b", "in-b"))
	mustCreate(t, s, &api.ConfigMap{ObjectMeta: api.ObjectMeta{Namespace: "a", Name: "cm"}})
	mustCreate(t, s, newPod("a", "in-a"))
	mustCreate(t, s, &api.Node{ObjectMeta: api.ObjectMeta{Name: "n1"}})

	expectNext(t, inA, api.Added, "in-a") // neither b's pod nor a's configmap
	expectNext(t, all, api.Added, "in-b")
	expectNext(t, all, api.Added, "in-a")
	expectNext(t, nodes, api.Added, "n1")
}

func TestWatchEventsAreCopies(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t, testOptions())
	w1, _ := s.Watch(ctx, podKind, "", 0)
	w2, _ := s.Watch(ctx, podKind, "", 0)
	mustCreate(t, s, newPod("default", "web"))
	e1, e2 := next(t, w1), next(t, w2)
	e1.Object.GetObjectMeta().Labels["app"] = "changed"
	if e2.Object.GetObjectMeta().Labels["app"] != "web" {
		t.Fatal("watchers share event objects")
	}
}

func TestSlowWatcherIsClosed(t *testing.T) {
	opts := testOptions()
	opts.WatchBuffer = 4
	s, _ := openStore(t, opts)
	ctx := context.Background()
	slow, err := s.Watch(ctx, podKind, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	fast, err := s.Watch(ctx, podKind, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	const writes = 50
	// Nobody reads slow: writes must still complete promptly, and the
	// other watcher (read after each write) keeps getting every event.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for i := range writes {
		name := fmt.Sprintf("p%d", i)
		if _, err := s.Create(wctx, newPod("default", name)); err != nil {
			t.Fatalf("write %d blocked by a slow watcher: %v", i, err)
		}
		expectNext(t, fast, api.Added, name)
	}
	// The slow watcher gets what was buffered, in order, then its channel closes.
	var last int64
	got := 0
	for e := range slow {
		if e.Revision != last+1 {
			t.Fatalf("revision %d after %d: gap", e.Revision, last)
		}
		last = e.Revision
		got++
	}
	if got >= writes || got == 0 {
		t.Fatalf("slow watcher got %d events before closing, want some but not all %d", got, writes)
	}
	if st := s.Stats(); st.SlowWatchersClosed != 1 {
		t.Fatalf("stats %+v, want one slow watcher closed", st)
	}
	// It resumes from its last revision.
	resumed, err := s.Watch(ctx, podKind, "", last)
	if err != nil {
		t.Fatal(err)
	}
	if e := next(t, resumed); e.Revision != last+1 {
		t.Fatalf("resumed at %d, want %d", e.Revision, last+1)
	}
}

func TestWatchStops(t *testing.T) {
	s, _ := openStore(t, testOptions())
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := s.Watch(ctx, podKind, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.Watch(context.Background(), podKind, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.Stats().Watchers; n != 2 {
		t.Fatalf("watchers = %d, want 2", n)
	}
	cancel()
	if _, ok := <-ch; ok {
		t.Fatal("event after cancel, want closed channel")
	}
	waitFor(t, "watcher count to drop", func() bool { return s.Stats().Watchers == 1 })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-other; ok {
		t.Fatal("event after Close, want closed channel")
	}
}
