package client_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
)

// fakeClock is a recorder's clock that tests move by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// correlatedRecorder is podRecorder with a clock the test moves.
func correlatedRecorder(t *testing.T, component string) (*fake.Client, *api.Pod, *client.Recorder, *fakeClock) {
	t.Helper()
	f, pod, r := podRecorder(t, component, "")
	clock := &fakeClock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	client.SetRecorderClock(r, clock.now)
	return f, pod, r, clock
}

// messages lists the events' messages with their counts, sorted.
func messages(evs []*api.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%s x%d", e.Message, e.Count))
	}
	slices.Sort(out)
	return out
}

// As client-go's EventAggregator: the tenth different message of similar
// events (one object, source, type and reason) within ten minutes, and
// every new one after it, is recorded as one combined event.
func TestRecorderCombinesSimilarEvents(t *testing.T) {
	ctx := t.Context()
	f, pod, r, clock := correlatedRecorder(t, "replicaset-controller")
	r.Event(ctx, pod, api.EventNormal, "SuccessfulCreate", "Created pod: web-00") // a repeat: counted, not a new message
	for i := range 12 {
		r.Eventf(ctx, pod, api.EventNormal, "SuccessfulCreate", "Created pod: web-%02d", i)
		clock.t = clock.t.Add(time.Second)
	}
	r.Event(ctx, pod, api.EventNormal, "SuccessfulDelete", "Deleted pod: web-00") // another reason: its own group
	flush(t, r)

	want := []string{"Created pod: web-00 x2"}
	for i := 1; i < 9; i++ {
		want = append(want, fmt.Sprintf("Created pod: web-%02d x1", i))
	}
	want = append(want, "(combined from similar events): Created pod: web-11 x3", "Deleted pod: web-00 x1")
	slices.Sort(want)
	evs := listEvents(t, f, "team")
	if got := messages(evs); !slices.Equal(got, want) {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, e := range evs {
		if e.Reason == "SuccessfulCreate" && (e.Source.Component != "replicaset-controller" || e.InvolvedObject.UID != pod.UID) {
			t.Errorf("event %s: source %+v, involved object %+v", e.Name, e.Source, e.InvolvedObject)
		}
	}

	// Ten minutes without one of them: the group starts afresh.
	clock.t = clock.t.Add(aggregateIntervalForTest + time.Second)
	r.Event(ctx, pod, api.EventNormal, "SuccessfulCreate", "Created pod: web-12")
	flush(t, r)
	if got := messages(listEvents(t, f, "team")); !slices.Contains(got, "Created pod: web-12 x1") {
		t.Errorf("after ten minutes, web-12 was not recorded on its own: %q", got)
	}
}

// aggregateIntervalForTest is client-go's defaultAggregateIntervalInSeconds.
const aggregateIntervalForTest = 600 * time.Second

// As client-go's EventSourceObjectSpamFilter: 25 events about one object
// from one source at once, then one every five minutes; another object
// has its own 25.
func TestRecorderDropsSpam(t *testing.T) {
	ctx := t.Context()
	f, pod, r, clock := correlatedRecorder(t, "kubelet")
	other := testPod("team", "db", "", nil)
	other.UID = "db-uid"
	for i := range 30 {
		// Different reasons: nothing to combine or count, each its own Event.
		r.Event(ctx, pod, api.EventNormal, fmt.Sprintf("Reason%02d", i), "something happened")
		clock.t = clock.t.Add(time.Millisecond) // and its own name
	}
	r.Event(ctx, other, api.EventNormal, "Pulled", "Container image already present")
	flush(t, r)
	count := func() (web, db int) {
		for _, e := range listEvents(t, f, "team") {
			switch e.InvolvedObject.Name {
			case "web":
				web++
			case "db":
				db++
			}
		}
		return web, db
	}
	if web, db := count(); web != 25 || db != 1 {
		t.Fatalf("events about web, db = %d, %d; want 25, 1", web, db)
	}

	clock.t = clock.t.Add(5 * time.Minute) // one token back
	r.Event(ctx, pod, api.EventNormal, "Later1", "after five minutes")
	clock.t = clock.t.Add(time.Millisecond)
	r.Event(ctx, pod, api.EventNormal, "Later2", "still too soon")
	flush(t, r)
	if web, _ := count(); web != 26 {
		t.Fatalf("after five minutes: %d events about web, want 26", web)
	}
}

// kube-scheduler's events.k8s.io library neither combines nor drops.
func TestRecorderWithoutCorrelation(t *testing.T) {
	ctx := t.Context()
	f, pod, r := podRecorder(t, "default-scheduler", "")
	r.WithoutCorrelation()
	for i := range 30 {
		r.Eventf(ctx, pod, api.EventWarning, "FailedScheduling", "0/%d nodes are available", i)
	}
	flush(t, r)
	if evs := listEvents(t, f, "team"); len(evs) != 30 {
		t.Fatalf("%d events, want 30: %q", len(evs), messages(evs))
	}
}
