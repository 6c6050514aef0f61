package store

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/internal/testwait"
)

// fakeClock is a settable clock for Options.Now.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock(t time.Time) *fakeClock {
	c := &fakeClock{}
	c.set(t)
	return c
}
func (c *fakeClock) now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *fakeClock) set(t time.Time)     { c.ns.Store(t.UnixNano()) }
func (c *fakeClock) add(d time.Duration) { c.ns.Add(int64(d)) }

func newEvent(name string, last time.Time) *api.Event {
	e := &api.Event{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: name}, Reason: "Test"}
	if !last.IsZero() {
		e.LastTimestamp = api.NewTime(last)
	}
	return e
}

func TestExpireEvents(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := newFakeClock(start)
	opts := testOptions()
	opts.EventTTL = time.Minute
	opts.SweepInterval = time.Hour // this test sweeps by hand
	opts.Now = clock.now
	s, _ := openStore(t, opts)

	mustCreate(t, s, newEvent("no-last", time.Time{})) // created at start: expires by creationTimestamp
	mustCreate(t, s, newEvent("old", start.Add(-2*time.Minute)))
	mustCreate(t, s, newEvent("recent", start.Add(30*time.Second)))
	mustCreate(t, s, newPod("default", "web")) // pods never expire
	ch, err := s.Watch(ctx, evKind, "", 0)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		advance time.Duration
		want    []string // events left, by name
	}{
		{0, []string{"no-last", "recent"}},
		{61 * time.Second, []string{"recent"}},
		{30 * time.Second, nil},
	}
	for _, tt := range tests {
		clock.add(tt.advance)
		if _, err := s.expireEvents(ctx); err != nil {
			t.Fatal(err)
		}
		objs, _, err := s.List(ctx, evKind, "")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range objs {
			got = append(got, o.GetObjectMeta().Name)
		}
		if len(got) != len(tt.want) || (len(got) > 0 && got[0] != tt.want[0]) {
			t.Fatalf("after %v: events %v, want %v", clock.now().Sub(start), got, tt.want)
		}
	}
	// Expiry is a delete like any other: watchers see it.
	for _, name := range []string{"old", "no-last", "recent"} {
		expectNext(t, ch, api.Deleted, name)
	}
	if _, err := s.Get(ctx, podKind, "default", "web"); err != nil {
		t.Fatalf("pod after sweep: %v", err)
	}
	if st := s.Stats(); st.ExpiredEvents != 3 {
		t.Fatalf("expired = %d, want 3", st.ExpiredEvents)
	}
}

func TestEventSweeperRuns(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := newFakeClock(start)
	opts := testOptions()
	opts.EventTTL = time.Minute
	opts.SweepInterval = time.Millisecond
	opts.Now = clock.now
	s, _ := openStore(t, opts)
	mustCreate(t, s, newEvent("e", time.Time{}))
	clock.add(2 * time.Minute)
	testwait.For(t, 5*time.Second, "the sweeper to delete the event", func() bool {
		_, err := s.Get(ctx, evKind, "default", "e")
		return api.IsNotFound(err)
	})
}
