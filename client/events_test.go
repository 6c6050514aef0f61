package client_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/fake"
)

func listEvents(t *testing.T, f *fake.Client, ns string) []*api.Event {
	t.Helper()
	evs, _, err := client.List[*api.Event](t.Context(), f, ns, api.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func flush(t *testing.T, r *client.Recorder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// podRecorder returns a fake cluster with one pod, team/web, as stored,
// and a recorder of component (on host) that writes to it.
func podRecorder(t *testing.T, component, host string) (*fake.Client, *api.Pod, *client.Recorder) {
	t.Helper()
	f := fake.New(testPod("team", "web", "", nil))
	pod, err := client.Get[*api.Pod](t.Context(), f, "team", "web")
	if err != nil {
		t.Fatal(err)
	}
	return f, pod, client.NewRecorder(f, component, host, nil)
}

func TestRecorderDeduplicates(t *testing.T) {
	ctx := t.Context()
	f, pod, r := podRecorder(t, "default-scheduler", "")

	for range 3 {
		r.Event(ctx, pod, api.EventWarning, "FailedScheduling", "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.")
	}
	r.Eventf(ctx, pod, api.EventNormal, "Scheduled", "Successfully assigned %s/%s to %s", "team", "web", "n1")
	flush(t, r)

	evs := listEvents(t, f, "team")
	if len(evs) != 2 {
		t.Fatalf("got %d events, want 2: %+v", len(evs), evs)
	}
	byReason := map[string]*api.Event{}
	for _, e := range evs {
		byReason[e.Reason] = e
	}
	fs := byReason["FailedScheduling"]
	if fs == nil || fs.Count != 3 || fs.Type != api.EventWarning {
		t.Fatalf("FailedScheduling event = %+v", fs)
	}
	want := api.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "team", Name: "web", UID: pod.UID, ResourceVersion: pod.ResourceVersion}
	if fs.InvolvedObject != want {
		t.Errorf("involvedObject = %+v, want %+v", fs.InvolvedObject, want)
	}
	if fs.Source.Component != "default-scheduler" || fs.FirstTimestamp.IsZero() || fs.LastTimestamp.Before(fs.FirstTimestamp.Time) {
		t.Errorf("source/timestamps = %+v %v %v", fs.Source, fs.FirstTimestamp, fs.LastTimestamp)
	}
	if sc := byReason["Scheduled"]; sc == nil || sc.Count != 1 || sc.Message != "Successfully assigned team/web to n1" {
		t.Errorf("Scheduled event = %+v", sc)
	}
	// One create per distinct event, one update per repeat.
	var creates, updates int
	for _, a := range f.Actions() {
		if a.Kind != "Event" {
			continue
		}
		switch a.Verb {
		case "create":
			creates++
		case "update":
			updates++
		}
	}
	if creates != 2 || updates != 2 {
		t.Errorf("creates = %d, updates = %d; want 2 and 2", creates, updates)
	}
}

// A repeat is the stored Event again with count+1 and a new last
// timestamp: its uid, creation time, first timestamp and involved object
// (the object as the first occurrence saw it) stay, though the recorder
// keeps only the Event's name, resourceVersion, count and first timestamp.
func TestRecorderBumpKeepsTheStoredEvent(t *testing.T) {
	ctx := t.Context()
	f, pod, r := podRecorder(t, "kubelet", "n1")
	record := func(p *api.Pod) {
		r.Event(ctx, p, api.EventWarning, "BackOff", "Back-off restarting failed container main")
	}

	record(pod)
	flush(t, r)
	evs := listEvents(t, f, "team")
	if len(evs) != 1 || evs[0].UID == "" || evs[0].CreationTimestamp.IsZero() {
		t.Fatalf("events = %+v", evs)
	}
	first := evs[0]
	changed := api.Clone(pod)
	changed.Labels = map[string]string{"restarted": "yes"}
	changed, err := client.Update(ctx, f, changed)
	if err != nil || changed.ResourceVersion == pod.ResourceVersion {
		t.Fatalf("update the pod: %v", err)
	}
	record(changed) // the same event of the same pod, at a later resourceVersion
	flush(t, r)
	evs = listEvents(t, f, "team")
	if len(evs) != 1 || evs[0].Count != 2 || evs[0].ResourceVersion == first.ResourceVersion {
		t.Fatalf("after the repeat: %+v", evs)
	}
	got := api.Clone(evs[0])
	got.Count, got.ResourceVersion, got.Generation = first.Count, first.ResourceVersion, first.Generation
	got.LastTimestamp, got.EventTime = first.LastTimestamp, first.EventTime
	if !reflect.DeepEqual(got, first) {
		t.Errorf("the bumped Event differs from the first beyond count, resourceVersion, generation and times:\n%+v\n%+v", evs[0], first)
	}
}

func TestRecorderFallbacks(t *testing.T) {
	ctx := t.Context()
	node := &api.Node{ObjectMeta: api.ObjectMeta{Name: "n1"}}
	f := fake.New(node)
	r := client.NewRecorder(f, "node-controller", "cp", nil)
	record := func() { r.Event(ctx, node, api.EventNormal, "NodeReady", "Node n1 status is now: NodeReady") }

	record()
	flush(t, r)
	evs := listEvents(t, f, "default") // cluster-scoped objects' events live in "default"
	if len(evs) != 1 || evs[0].InvolvedObject.Kind != "Node" {
		t.Fatalf("events = %+v", evs)
	}

	// Someone else bumped the event: our cached resourceVersion is stale,
	// the recorder refetches and bumps the stored count.
	e := evs[0]
	e.Count = 10
	if _, err := client.Update(ctx, f, e); err != nil {
		t.Fatal(err)
	}
	record()
	flush(t, r)
	evs = listEvents(t, f, "default")
	if len(evs) != 1 || evs[0].Count != 11 {
		t.Fatalf("after conflict: %+v", evs)
	}

	// The event expired: the recorder creates a new one.
	if err := f.Delete(ctx, kind(t, &api.Event{}), "default", evs[0].Name, api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	record()
	flush(t, r)
	evs = listEvents(t, f, "default")
	if len(evs) != 1 || evs[0].Count != 1 {
		t.Fatalf("after delete: %+v", evs)
	}
}

func TestRecorderRunAndDrop(t *testing.T) {
	ctx := t.Context()
	pod := testPod("default", "web", "", nil)
	f := fake.New(pod)
	// Uncorrelated: the spam filter would take all but 25 of them first.
	r := client.NewRecorder(f, "test", "", nil).WithoutCorrelation()

	// Without Run, the bounded buffer fills and further events are dropped.
	for range 2000 {
		r.Event(ctx, pod, api.EventNormal, "Pulled", "same message")
	}
	r.Event(ctx, pod, api.EventNormal, "Other", "dropped too: the buffer is full")
	r.Event(ctx, pod, "Fatal", "Nope", "invalid type")
	flush(t, r)
	evs := listEvents(t, f, "default")
	if len(evs) != 1 || evs[0].Count != 1024 {
		t.Fatalf("events = %d, count %d; want 1 with count 1024", len(evs), evs[0].Count)
	}

	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	r.Event(ctx, pod, api.EventWarning, "BackOff", "Back-off restarting failed container")
	flush(t, r) // waits for Run's write
	if evs := listEvents(t, f, "default"); len(evs) != 2 {
		t.Errorf("after Run: %d events, want 2", len(evs))
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}
