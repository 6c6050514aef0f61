package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/store"
	"skiff.dev/skiff/controlplane/store/storetest"
)

// Watchers of one live change share one object (one copy in memory
// however many informers a process runs); a watcher replaying the history
// decodes its own, so the history never pins objects.
func TestWatchersShareTheObjectOfALiveChange(t *testing.T) {
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

// watchPods opens a store and a live watch of its pods, for ten seconds.
func watchPods(t *testing.T) (*store.Bolt, context.Context, <-chan store.Event) {
	t.Helper()
	s, _ := openStore(t, testOptions())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	ch, err := s.Watch(ctx, storetest.PodKind, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	return s, ctx, ch
}

// The pods live watchers get share one API access volume source (what
// api.ShareReadOnly shares), a pod with a source of its own keeps it, and
// the writer's objects share nothing with them.
func TestLiveCopiesShareTheAPIAccessVolume(t *testing.T) {
	s, ctx, ch := watchPods(t)
	withVolume := func(name string) *api.Pod {
		p := storetest.NewPod("default", name)
		p.Spec.Volumes = []api.Volume{api.APIAccessVolume("kube-api-access-" + name)}
		return p
	}
	own := withVolume("own")
	own.Spec.Volumes[0].Projected.Sources[0].ServiceAccountToken.Audience = "vault"
	var written []api.Object
	for _, p := range []*api.Pod{withVolume("a"), withVolume("b"), own} {
		out, err := s.Create(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		written = append(written, out)
	}
	var got []*api.Pod
	for range written {
		select {
		case ev := <-ch:
			got = append(got, ev.Object.(*api.Pod))
		case <-ctx.Done():
			t.Fatal("no event")
		}
	}
	a, b, o := got[0].Spec.Volumes[0].Projected, got[1].Spec.Volumes[0].Projected, got[2].Spec.Volumes[0].Projected
	if a != b {
		t.Error("two watched pods with the API access volume have a source each, want one shared")
	}
	if o == a || o.Sources[0].ServiceAccountToken.Audience != "vault" {
		t.Errorf("the pod with its own source got %+v, the shared one", o.Sources[0].ServiceAccountToken)
	}
	for i, w := range written {
		if w.(*api.Pod).Spec.Volumes[0].Projected == a {
			t.Errorf("the writer's pod %d shares the watchers' source", i)
		}
	}
}

// A create whose writer gives its object up and only reads it after
// (CreateEncoded's share) gives the live watchers that very object, which
// then shares the API access volume's source with the other live pods as
// a copy would; its JSON, encoded before, is the object's.
func TestSharedCreateSharesTheAPIAccessVolume(t *testing.T) {
	s, ctx, ch := watchPods(t)
	var got, written []*api.Pod
	var raws [][]byte
	for _, name := range []string{"a", "b"} {
		p := storetest.NewPod("default", name)
		p.Spec.Volumes = []api.Volume{api.APIAccessVolume("kube-api-access-" + name)}
		mine := p.Spec.Volumes[0].Projected
		out, raw, err := s.CreateEncoded(ctx, p, true)
		if err != nil {
			t.Fatal(err)
		}
		if out.(*api.Pod).Spec.Volumes[0].Projected == mine {
			t.Errorf("pod %s kept a source of its own, want the shared one", name)
		}
		written, raws = append(written, out.(*api.Pod)), append(raws, raw)
		select {
		case ev := <-ch:
			got = append(got, ev.Object.(*api.Pod))
		case <-ctx.Done():
			t.Fatal("no event")
		}
	}
	for i := range got {
		if got[i] != written[i] {
			t.Errorf("watcher's pod %d is a copy, want the writer's object", i)
		}
		enc, err := api.Encode(written[i])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(enc, raws[i]) {
			t.Errorf("pod %d: JSON returned\n%s\nwant the object's\n%s", i, raws[i], enc)
		}
	}
	if got[0].Spec.Volumes[0].Projected != got[1].Spec.Volumes[0].Projected {
		t.Error("two watched pods with the API access volume have a source each, want one shared")
	}
}

// The history keeps each change S2-compressed; a replay from it gives the
// very objects the live watchers got (the same JSON, to the byte), for
// random pods of random sizes, updates and deletes among them.
func TestReplayedHistoryIsTheLiveStream(t *testing.T) {
	s, _ := openStore(t, testOptions())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := storetest.MustCreate(t, s, &api.ConfigMap{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: "start"}})
	from, err := strconv.ParseInt(storetest.RV(start), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	live, err := s.Watch(ctx, storetest.PodKind, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(26, 2))
	word := func() string {
		b := make([]byte, rnd.IntN(40))
		for i := range b {
			b[i] = byte(' ' + rnd.IntN(95)) // printable ASCII, quotes and backslashes included
		}
		return string(b)
	}
	const n = 300
	writes := 0
	for i := range n {
		p := storetest.NewPod("default", fmt.Sprintf("p-%03d", i))
		p.Labels = map[string]string{}
		for range rnd.IntN(20) {
			p.Labels[fmt.Sprintf("k%d", rnd.IntN(1000))] = word()
		}
		p.Annotations = map[string]string{"big": strings.Repeat(word(), rnd.IntN(200))}
		storetest.MustCreate(t, s, p)
		writes++
		if rnd.IntN(3) == 0 {
			if _, err := s.Delete(ctx, storetest.PodKind, "default", p.Name, nil); err != nil {
				t.Fatal(err)
			}
			writes++
		}
	}
	// An event is kept as JSON only when compressing it would not make it
	// smaller (the ConfigMap, a pod without labels or annotation).
	events, compressed, plain := store.HistoryCompressed(s)
	if events != writes+1 || plain != 0 || compressed < writes*9/10 {
		t.Fatalf("history: %d events, %d of them compressed, %d kept as JSON although compression makes them smaller; want %d events, most compressed",
			events, compressed, plain, writes+1)
	}
	replay, err := s.Watch(ctx, storetest.PodKind, "", from)
	if err != nil {
		t.Fatal(err)
	}
	next := func(ch <-chan store.Event) store.Event {
		t.Helper()
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("watch closed early")
			}
			return ev
		case <-ctx.Done():
			t.Fatal("no event")
		}
		return store.Event{}
	}
	for i := range writes {
		want, got := next(live), next(replay)
		wj, err := json.Marshal(want.Object)
		if err != nil {
			t.Fatal(err)
		}
		gj, err := json.Marshal(got.Object)
		if err != nil {
			t.Fatal(err)
		}
		if got.Type != want.Type || got.Revision != want.Revision || !bytes.Equal(gj, wj) {
			t.Fatalf("event %d: replayed %s %d %s\nlive %s %d %s", i, got.Type, got.Revision, gj, want.Type, want.Revision, wj)
		}
	}
}
