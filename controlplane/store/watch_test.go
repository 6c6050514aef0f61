package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/internal/testwait"
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
	testwait.For(t, 5*time.Second, "watcher count to drop", func() bool { return s.Stats().Watchers == 1 })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-other; ok {
		t.Fatal("event after Close, want closed channel")
	}
}

func TestWaitForRevision(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t, testOptions())
	p := mustCreate(t, s, newPod("default", "a"))
	rev := revOf(t, p)

	// Reached already: returns at once, even with a context that has ended.
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.WaitForRevision(done, rev); err != nil {
		t.Fatalf("reached revision: %v", err)
	}
	// Not reached and nothing written: the context's error.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := s.WaitForRevision(short, rev+1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("unreached revision: %v, want DeadlineExceeded", err)
	}
	// A commit wakes a waiter.
	waited := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		waited <- s.WaitForRevision(wctx, rev+2)
	}()
	mustCreate(t, s, newPod("default", "b"))
	mustCreate(t, s, newPod("default", "c"))
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken by the commits")
	}
	if got := s.Revision(); got < rev+2 {
		t.Fatalf("revision %d after the wait, want >= %d", got, rev+2)
	}
	// Close wakes a waiter with ErrClosed.
	go func() { waited <- s.WaitForRevision(ctx, rev+100) }()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("waiter after close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken by Close")
	}
}

func TestListExact(t *testing.T) {
	ctx := context.Background()
	opts := testOptions()
	opts.HistorySize = 4
	s, _ := openStore(t, opts)
	a := mustCreate(t, s, newPod("default", "a"))                                                       // 1
	mustCreate(t, s, newPod("other", "b"))                                                              // 2
	cm := mustCreate(t, s, &api.ConfigMap{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: "c"}}) // 3
	cm.GetObjectMeta().Labels = map[string]string{"v": "2"}
	if _, err := s.Update(ctx, cm); err != nil { // 4
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		kind      *api.Kind
		namespace string
		rev       int64
		want      []string // names, or nil with wantErr
		wantErr   func(error) bool
	}{
		{name: "current revision", kind: podKind, rev: 4, want: []string{"a", "b"}},
		{name: "pods unchanged since 2", kind: podKind, rev: 2, want: []string{"a", "b"}},
		{name: "default pods unchanged since 1", kind: podKind, namespace: "default", rev: 1, want: []string{"a"}},
		{name: "all pods changed after 1", kind: podKind, rev: 1, wantErr: api.IsGone},
		{name: "configmap changed after 3", kind: cmKind, rev: 3, wantErr: api.IsGone},
		{name: "future revision", kind: podKind, rev: 5, wantErr: api.IsTooLargeResourceVersion},
		{name: "zero", kind: podKind, rev: 0, wantErr: func(err error) bool { return api.CodeOf(err) == 400 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			items, err := s.ListExact(ctx, tt.kind, tt.namespace, tt.rev)
			if tt.wantErr != nil {
				if !tt.wantErr(err) {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, o := range items {
				names = append(names, o.GetObjectMeta().Name)
			}
			if fmt.Sprint(names) != fmt.Sprint(tt.want) {
				t.Fatalf("names = %v, want %v", names, tt.want)
			}
		})
	}
	// Past the history: Gone even though the pods did not change.
	for range 4 {
		cm.GetObjectMeta().ResourceVersion = ""
		cm.GetObjectMeta().Labels["v"] += "x"
		if _, err := s.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.ListExact(ctx, podKind, "", revOf(t, a)+1); !api.IsGone(err) {
		t.Fatalf("revision older than the history: %v, want Gone", err)
	}
}
