package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"skiff.dev/skiff/api"
)

// openRecentTest opens a store with a watcher of each of kinds open (and
// drained): what is written of a kind nobody watches is not copied, so
// not kept (liveCopy).
func openRecentTest(t *testing.T, kinds ...*api.Kind) *Bolt {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "state.db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		s.Close()
	})
	for _, k := range kinds {
		ch, err := s.Watch(ctx, k, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for range ch {
			}
		}()
	}
	return s
}

var podKindForRecent = api.MustKindOf(&api.Pod{})

func recentPod(name string) *api.Pod {
	return &api.Pod{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: name}, Spec: api.PodSpec{Containers: []api.Container{{Name: "c", Image: "busybox"}}}}
}

// setLabel is a tryUpdate that sets one label on a private copy.
func setLabel(k, v string) func(api.Object) (api.Object, error) {
	return func(cur api.Object) (api.Object, error) {
		m := cur.GetObjectMeta()
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		m.Labels[k] = v
		return cur, nil
	}
}

// A GuaranteedUpdate of an object just written starts from that write:
// no read transaction, and the write it makes is what a read would have
// given.
func TestGuaranteedUpdateStartsFromTheLastWrite(t *testing.T) {
	ctx := context.Background()
	eventKind := api.MustKindOf(&api.Event{})
	s := openRecentTest(t, podKindForRecent, eventKind)
	created, err := s.Create(ctx, recentPod("web"))
	if err != nil {
		t.Fatal(err)
	}
	txs, starts := s.db.Stats().TxN, s.Stats().RecentStarts
	out, err := s.GuaranteedUpdate(ctx, podKindForRecent, "default", "web", setLabel("tier", "front"))
	if err != nil {
		t.Fatal(err)
	}
	if n := s.db.Stats().TxN - txs; n != 0 {
		t.Errorf("%d read transactions, want none: the create is the start", n)
	}
	if n := s.Stats().RecentStarts - starts; n != 1 {
		t.Errorf("RecentStarts moved by %d, want 1", n)
	}
	got, err := s.Get(ctx, podKindForRecent, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	if got.GetObjectMeta().Labels["tier"] != "front" || got.GetObjectMeta().UID != created.GetObjectMeta().UID ||
		got.GetObjectMeta().ResourceVersion != out.GetObjectMeta().ResourceVersion {
		t.Fatalf("stored %+v after the update, which returned %+v", got.GetObjectMeta(), out.GetObjectMeta())
	}
	// Events are left out: an update of one reads the store.
	ev := &api.Event{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: "web.1"}, Reason: "Scheduled"}
	if _, err := s.Create(ctx, ev); err != nil {
		t.Fatal(err)
	}
	starts = s.Stats().RecentStarts
	if _, err := s.GuaranteedUpdate(ctx, eventKind, "default", "web.1", setLabel("a", "b")); err != nil {
		t.Fatal(err)
	}
	if n := s.Stats().RecentStarts - starts; n != 0 {
		t.Errorf("an Event's update started from its last write (%d), want a read: Events are left out", n)
	}
	// So is what nobody watches: it is not even copied.
	cm := &api.ConfigMap{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: "settings"}}
	if _, err := s.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GuaranteedUpdate(ctx, api.MustKindOf(cm), "default", "settings", setLabel("a", "b")); err != nil {
		t.Fatal(err)
	}
	if n := s.Stats().RecentStarts - starts; n != 0 {
		t.Errorf("the update of a ConfigMap nobody watches started from its last write (%d), want a read", n)
	}
	// A delete takes the object out: the next update reads, and finds nothing.
	if _, err := s.Delete(ctx, podKindForRecent, "default", "web", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GuaranteedUpdate(ctx, podKindForRecent, "default", "web", setLabel("a", "b")); !api.IsNotFound(err) {
		t.Fatalf("update after the delete: %v, want NotFound", err)
	}
}

// A start from a stale entry (a write on its way when it was taken; here
// put back by hand) decides nothing by itself: its write conflicts and
// the next try reads the store; a tryUpdate error or a no-op on it is
// checked against the store's object.
func TestGuaranteedUpdateChecksAStaleStart(t *testing.T) {
	ctx := context.Background()
	s := openRecentTest(t, podKindForRecent)
	key := bucketKey(podKindForRecent.GroupResource(), "default/web")
	if _, err := s.Create(ctx, recentPod("web")); err != nil {
		t.Fatal(err)
	}
	stale := s.recent.entries[key]
	restore := func() {
		s.recent.mu.Lock()
		s.recent.entries[key] = stale
		s.recent.mu.Unlock()
	}
	if _, err := s.GuaranteedUpdate(ctx, podKindForRecent, "default", "web", setLabel("tier", "front")); err != nil {
		t.Fatal(err)
	}

	// A write from the stale start conflicts, then goes on the store's.
	restore()
	if _, err := s.GuaranteedUpdate(ctx, podKindForRecent, "default", "web", setLabel("zone", "a")); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, podKindForRecent, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	if l := got.GetObjectMeta().Labels; l["tier"] != "front" || l["zone"] != "a" {
		t.Fatalf("labels %v, want both writes'", l)
	}

	// A no-op on the stale start is not one on the store's object.
	restore()
	if _, err := s.GuaranteedUpdate(ctx, podKindForRecent, "default", "web", func(cur api.Object) (api.Object, error) {
		delete(cur.GetObjectMeta().Labels, "zone") // the stale object has no zone: a no-op there
		return cur, nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, _ = s.Get(ctx, podKindForRecent, "default", "web"); got.GetObjectMeta().Labels["zone"] != "" {
		t.Fatalf("labels %v: the delete of zone was taken for a no-op on the stale start", got.GetObjectMeta().Labels)
	}

	// An error on the stale start only is not the answer.
	restore()
	errStale := errors.New("no tier label")
	if _, err := s.GuaranteedUpdate(ctx, podKindForRecent, "default", "web", func(cur api.Object) (api.Object, error) {
		if cur.GetObjectMeta().Labels["tier"] == "" {
			return nil, errStale
		}
		return setLabel("checked", "yes")(cur)
	}); err != nil {
		t.Fatalf("update: %v, want it done on the store's object", err)
	}
	// An error on the store's object is.
	if _, err := s.GuaranteedUpdate(ctx, podKindForRecent, "default", "web", func(api.Object) (api.Object, error) {
		return nil, errStale
	}); !errors.Is(err, errStale) {
		t.Fatalf("update: %v, want tryUpdate's error", err)
	}
}

// recent keeps at most recentMax keys, the newest.
func TestRecentWritesBounded(t *testing.T) {
	ctx := context.Background()
	s := openRecentTest(t, podKindForRecent)
	n := recentMax + 100
	for i := range n {
		if _, err := s.Create(ctx, recentPod(fmt.Sprintf("p-%05d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(s.recent.entries); got != recentMax {
		t.Fatalf("%d entries after %d creates, want %d", got, n, recentMax)
	}
	for _, i := range []int{0, 99} {
		if _, _, ok := s.recent.get(bucketKey(podKindForRecent.GroupResource(), fmt.Sprintf("default/p-%05d", i)), false); ok {
			t.Errorf("p-%05d, among the oldest, is still kept", i)
		}
	}
	if _, _, ok := s.recent.get(bucketKey(podKindForRecent.GroupResource(), fmt.Sprintf("default/p-%05d", n-1)), false); !ok {
		t.Error("the newest write is not kept")
	}
}

// GetMeta of an object among the last writes answers from that write:
// no read transaction, the stored metadata (a copy the caller may
// change) and nothing else; after a delete, NotFound from the store.
func TestGetMetaFromTheLastWrite(t *testing.T) {
	ctx := context.Background()
	s := openRecentTest(t, podKindForRecent)
	p := recentPod("web")
	p.Labels = map[string]string{"app": "web"}
	if _, err := s.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	updated, err := s.GuaranteedUpdate(ctx, podKindForRecent, "default", "web", setLabel("tier", "front"))
	if err != nil {
		t.Fatal(err)
	}
	txs := s.db.Stats().TxN
	meta, err := s.GetMeta(ctx, podKindForRecent, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	if n := s.db.Stats().TxN - txs; n != 0 {
		t.Errorf("%d read transactions, want none: the update is the answer", n)
	}
	got := meta.(*api.Pod)
	um := updated.GetObjectMeta()
	if got.APIVersion != "v1" || got.Kind != "Pod" || got.Name != "web" || got.UID != um.UID ||
		got.ResourceVersion != um.ResourceVersion || got.Labels["tier"] != "front" || got.Labels["app"] != "web" {
		t.Fatalf("GetMeta = %+v, want the update's metadata %+v", got.ObjectMeta, um)
	}
	if len(got.Spec.Containers) != 0 {
		t.Errorf("GetMeta has a spec: %+v", got.Spec)
	}
	got.Labels["tier"] = "changed by the caller"
	again, err := s.GetMeta(ctx, podKindForRecent, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	if l := again.GetObjectMeta().Labels["tier"]; l != "front" {
		t.Fatalf("a caller's change reached the next GetMeta: tier=%q", l)
	}
	if _, err := s.Delete(ctx, podKindForRecent, "default", "web", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetMeta(ctx, podKindForRecent, "default", "web"); !api.IsNotFound(err) {
		t.Fatalf("GetMeta after the delete: %v, want NotFound", err)
	}
}
