package store_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/store"
	st "skiff.dev/skiff/controlplane/store/storetest"
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

// The bbolt store expires an Event by its lastTimestamp (else its
// creationTimestamp), on its own clock.
// sweptByHand opens a store whose Events live a minute, on a clock set
// at start, that sweeps only when the test calls ExpireEvents.
func sweptByHand(t *testing.T) (s *store.Bolt, clock *fakeClock, start time.Time) {
	start = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock = newFakeClock(start)
	opts := testOptions()
	opts.EventTTL = time.Minute
	opts.SweepInterval = time.Hour
	opts.Now = clock.now
	s, _ = openStore(t, opts)
	return s, clock, start
}

// eventNames lists the stored Events' names.
func eventNames(t *testing.T, s store.Store) []string {
	t.Helper()
	objs, _, err := s.List(context.Background(), st.EvKind, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.GetObjectMeta().Name)
	}
	return got
}

func TestExpireEventsByLastTimestamp(t *testing.T) {
	ctx := context.Background()
	s, clock, start := sweptByHand(t)

	st.MustCreate(t, s, st.NewEvent("no-last", time.Time{})) // created at start: expires by creationTimestamp
	st.MustCreate(t, s, st.NewEvent("old", start.Add(-2*time.Minute)))
	st.MustCreate(t, s, st.NewEvent("recent", start.Add(30*time.Second)))
	st.MustCreate(t, s, st.NewPod("default", "web")) // pods never expire
	ch, err := s.Watch(ctx, st.EvKind, "", 0)
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
		if _, err := store.ExpireEvents(ctx, s); err != nil {
			t.Fatal(err)
		}
		got := eventNames(t, s)
		if len(got) != len(tt.want) || (len(got) > 0 && got[0] != tt.want[0]) {
			t.Fatalf("after %v: events %v, want %v", clock.now().Sub(start), got, tt.want)
		}
	}
	for _, name := range []string{"old", "no-last", "recent"} {
		st.ExpectNext(t, ch, api.Deleted, name)
	}
	if stats := s.Stats(); stats.ExpiredEvents != 3 {
		t.Fatalf("expired = %d, want 3", stats.ExpiredEvents)
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
	st.MustCreate(t, s, st.NewEvent("e", time.Time{}))
	clock.add(2 * time.Minute)
	testwait.For(t, 5*time.Second, "the sweeper to delete the event", func() bool {
		_, err := s.Get(ctx, st.EvKind, "default", "e")
		return api.IsNotFound(err)
	})
}

// A sweep reads the stored Events only when one of them may have expired:
// the oldest the last read kept, or an older one written since, even one
// whose lastTimestamp a client set long past.
func TestSweepReadsTheEventsOnlyWhenOneMayHaveExpired(t *testing.T) {
	ctx := context.Background()
	s, clock, start := sweptByHand(t)
	sweep := func(advance time.Duration, wantReads uint64, want ...string) {
		t.Helper()
		clock.add(advance)
		if _, err := store.ExpireEvents(ctx, s); err != nil {
			t.Fatal(err)
		}
		if got := store.SweepReads(s); got != wantReads {
			t.Errorf("at %v: %d sweeps read the Events, want %d", clock.now().Sub(start), got, wantReads)
		}
		if got := eventNames(t, s); !slices.Equal(got, want) {
			t.Fatalf("at %v: events %v, want %v", clock.now().Sub(start), got, want)
		}
	}

	st.MustCreate(t, s, st.NewEvent("a", start))
	sweep(0, 1, "a")              // the first sweep reads: nothing known yet
	sweep(30*time.Second, 1, "a") // "a" expires at 1m: not read
	st.MustCreate(t, s, st.NewEvent("old", start.Add(-5*time.Minute)))
	sweep(0, 2, "a")         // an older Event was written: read, and it goes
	sweep(31*time.Second, 3) // 1m01s: "a" goes, none left
	sweep(time.Minute, 3)    // none stored: not read
	st.MustCreate(t, s, st.NewEvent("b", clock.now()))
	sweep(30*time.Second, 3, "b") // "b" expires in 30 s more
	sweep(31*time.Second, 4)      // read, and it goes
}
