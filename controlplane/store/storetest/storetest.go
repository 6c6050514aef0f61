// Package storetest is the behaviour every store.Store keeps, as one test
// suite: Run it against an implementation (the bbolt store in package
// store, the etcd store in etcdstore) and it checks the rules of the
// interface doc: revisions, optimistic concurrency, errors, copies, lists,
// exact lists, watches, waiting for a revision, Event expiry and Close.
//
// Revisions are checked relative to the store's revision when it opened
// (bbolt starts at 0, a fresh etcd at 1). Where implementations truly
// differ the Harness says so (MultiVersion) and the suite expects each
// answer from the store that gives it.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/store"
	"skiff.dev/skiff/internal/testwait"
)

// Harness is what the suite needs from an implementation.
type Harness struct {
	// Open returns a new, empty store that nothing else writes to, closed
	// by tb.Cleanup.
	Open func(tb testing.TB) store.Store
	// Reopen closes s and opens its data again, as a restart does; the
	// returned store is closed by tb.Cleanup.
	Reopen func(tb testing.TB, s store.Store) store.Store
	// Compact drops watch history: afterwards a Watch or ListExact from a
	// revision before rev fails with Gone, one from rev works. rev is at
	// most s.Revision().
	Compact func(tb testing.TB, s store.Store, rev int64)
	// ExpireEvents makes every stored Event outlive its TTL and returns
	// once the store has deleted them (as an expiry does, seen by watchers).
	ExpireEvents func(tb testing.TB, s store.Store)
	// MultiVersion: the store keeps past versions of objects (etcd's
	// MVCC), so ListExact serves any revision since the last compaction,
	// even when the kind changed after it. A store that keeps only current
	// objects (bbolt) fails with Gone then, as the interface allows.
	MultiVersion bool
}

// Run runs the suite, each case on a fresh store.
func Run(t *testing.T, h Harness) {
	cases := []struct {
		name string
		run  func(t *testing.T, h Harness)
	}{
		{"CreateGetUpdateDelete", testCreateGetUpdateDelete},
		{"WriteErrors", testWriteErrors},
		{"DeletePreconditionsHold", testDeletePreconditionsHold},
		{"ListNamespaces", testListNamespaces},
		{"ObjectsAreCopies", testObjectsAreCopies},
		{"GuaranteedUpdate", testGuaranteedUpdate},
		{"ConcurrentWriters", testConcurrentWriters},
		{"ConcurrentUpdatesSameVersion", testConcurrentUpdatesSameVersion},
		{"Persistence", testPersistence},
		{"Close", testClose},
		{"ContextCanceled", testContextCanceled},
		{"WatchFromNow", testWatchFromNow},
		{"WatchFromFuture", testWatchFromFuture},
		{"WatchReplay", testWatchReplay},
		{"WatchFilters", testWatchFilters},
		{"WatchEventsAreNotTheWriters", testWatchEventsAreNotTheWriters},
		{"WatchStops", testWatchStops},
		{"WaitForRevision", testWaitForRevision},
		{"ListExact", testListExact},
		{"ExpireEvents", testExpireEvents},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, h) })
	}
}

func testCreateGetUpdateDelete(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.Open(t)
	base := s.Revision()
	rv := func(n int64) string { return store.FormatRevision(base + n) }

	created := MustCreate(t, s, NewPod("default", "web")).(*api.Pod)
	m := created.ObjectMeta
	if m.ResourceVersion != rv(1) || m.UID == "" || m.CreationTimestamp.IsZero() {
		t.Fatalf("created meta = %+v, want resourceVersion %s, uid and creationTimestamp set", m, rv(1))
	}
	if created.APIVersion != "v1" || created.Kind != "Pod" {
		t.Fatalf("type meta = %+v", created.TypeMeta)
	}
	if len(m.UID) != 36 || m.UID[14] != '4' {
		t.Fatalf("uid %q is not a v4 uuid", m.UID)
	}

	got, err := s.Get(ctx, PodKind, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	if g := got.(*api.Pod); g.UID != m.UID || g.ResourceVersion != rv(1) || g.Spec.Containers[0].Image != "nginx:1.27" || g.Kind != "Pod" {
		t.Fatalf("get = %+v", g)
	}

	upd := got.(*api.Pod)
	upd.Spec.Containers[0].Image = "nginx:1.28"
	upd.UID, upd.CreationTimestamp = "", api.Time{} // kept from the stored object
	out, err := s.Update(ctx, upd)
	if err != nil {
		t.Fatal(err)
	}
	if o := out.(*api.Pod); o.ResourceVersion != rv(2) || o.UID != m.UID || !o.CreationTimestamp.Equal(m.CreationTimestamp.Time) {
		t.Fatalf("updated meta = %+v", o.ObjectMeta)
	}
	if got, err := s.Get(ctx, PodKind, "default", "web"); err != nil || got.GetObjectMeta().UID != m.UID || RV(got) != rv(2) {
		t.Fatalf("get after update: %v, %v", got, err)
	}

	// Update without resourceVersion: unconditional.
	upd.ResourceVersion = ""
	if out, err = s.Update(ctx, upd); err != nil || RV(out) != rv(3) {
		t.Fatalf("unconditional update: %v, rv %v", err, out)
	}

	del, err := s.Delete(ctx, PodKind, "default", "web", nil)
	if err != nil {
		t.Fatal(err)
	}
	if RV(del) != rv(4) || del.(*api.Pod).Spec.Containers[0].Image != "nginx:1.28" || del.GetObjectMeta().UID != m.UID {
		t.Fatalf("deleted = %+v, want last state with resourceVersion %s", del, rv(4))
	}
	if _, err := s.Get(ctx, PodKind, "default", "web"); !api.IsNotFound(err) {
		t.Fatalf("get after delete: %v, want NotFound", err)
	}
	if s.Revision() != base+4 {
		t.Fatalf("revision = %d, want %d", s.Revision(), base+4)
	}
	// The name is free again.
	if again := MustCreate(t, s, NewPod("default", "web")); RV(again) != rv(5) || again.GetObjectMeta().UID == m.UID {
		t.Fatalf("create after delete = %+v", again.GetObjectMeta())
	}
}

func testWriteErrors(t *testing.T, h Harness) {
	ptr := func(s string) *string { return &s }
	tests := []struct {
		name string
		// do runs against a store holding only default/web.
		do   func(ctx context.Context, s store.Store, web *api.Pod) error
		want func(error) bool
	}{
		{"create existing", func(ctx context.Context, s store.Store, _ *api.Pod) error {
			_, err := s.Create(ctx, NewPod("default", "web"))
			return err
		}, api.IsAlreadyExists},
		{"get missing", func(ctx context.Context, s store.Store, _ *api.Pod) error {
			_, err := s.Get(ctx, PodKind, "default", "nope")
			return err
		}, api.IsNotFound},
		{"get other namespace", func(ctx context.Context, s store.Store, _ *api.Pod) error {
			_, err := s.Get(ctx, PodKind, "other", "web")
			return err
		}, api.IsNotFound},
		{"get other kind", func(ctx context.Context, s store.Store, _ *api.Pod) error {
			_, err := s.Get(ctx, CMKind, "default", "web")
			return err
		}, api.IsNotFound},
		{"update missing", func(ctx context.Context, s store.Store, _ *api.Pod) error {
			_, err := s.Update(ctx, NewPod("default", "nope"))
			return err
		}, api.IsNotFound},
		{"update stale resourceVersion", func(ctx context.Context, s store.Store, web *api.Pod) error {
			web.ResourceVersion = store.FormatRevision(s.Revision() + 7)
			_, err := s.Update(ctx, web)
			return err
		}, api.IsConflict},
		{"update other uid", func(ctx context.Context, s store.Store, web *api.Pod) error {
			web.UID = "not-the-uid"
			_, err := s.Update(ctx, web)
			return err
		}, api.IsConflict},
		{"update invalid resourceVersion", func(ctx context.Context, s store.Store, web *api.Pod) error {
			web.ResourceVersion = "abc"
			_, err := s.Update(ctx, web)
			return err
		}, func(err error) bool { return api.ReasonOf(err) == api.ReasonBadRequest }},
		{"delete missing", func(ctx context.Context, s store.Store, _ *api.Pod) error {
			_, err := s.Delete(ctx, PodKind, "default", "nope", nil)
			return err
		}, api.IsNotFound},
		{"delete stale resourceVersion precondition", func(ctx context.Context, s store.Store, _ *api.Pod) error {
			_, err := s.Delete(ctx, PodKind, "default", "web", &api.Preconditions{ResourceVersion: ptr("9999")})
			return err
		}, api.IsConflict},
		{"delete other uid precondition", func(ctx context.Context, s store.Store, _ *api.Pod) error {
			_, err := s.Delete(ctx, PodKind, "default", "web", &api.Preconditions{UID: ptr("x")})
			return err
		}, api.IsConflict},
		{"create without name", func(ctx context.Context, s store.Store, _ *api.Pod) error {
			_, err := s.Create(ctx, NewPod("default", ""))
			return err
		}, func(err error) bool { return api.ReasonOf(err) == api.ReasonBadRequest }},
		{"create nil", func(ctx context.Context, s store.Store, _ *api.Pod) error {
			_, err := s.Create(ctx, nil)
			return err
		}, func(err error) bool { return api.ReasonOf(err) == api.ReasonBadRequest }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			s := h.Open(t)
			web := MustCreate(t, s, NewPod("default", "web")).(*api.Pod)
			rev := s.Revision()
			err := tt.do(ctx, s, api.Clone(web))
			if !tt.want(err) {
				t.Fatalf("err = %v (reason %q)", err, api.ReasonOf(err))
			}
			var se *api.StatusError
			if !errors.As(err, &se) {
				t.Fatalf("err %T is not a *api.StatusError", err)
			}
			// The store is unchanged.
			if s.Revision() != rev {
				t.Fatalf("revision = %d after a failed write, want %d", s.Revision(), rev)
			}
			got, err := s.Get(ctx, PodKind, "default", "web")
			if err != nil || RV(got) != RV(web) {
				t.Fatalf("web after failed write: %v, %v", got, err)
			}
		})
	}
}

func testDeletePreconditionsHold(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.Open(t)
	web := MustCreate(t, s, NewPod("default", "web"))
	uid, rv := web.GetObjectMeta().UID, RV(web)
	if _, err := s.Delete(ctx, PodKind, "default", "web", &api.Preconditions{UID: &uid, ResourceVersion: &rv}); err != nil {
		t.Fatalf("delete with matching preconditions: %v", err)
	}
	if _, err := s.Get(ctx, PodKind, "default", "web"); !api.IsNotFound(err) {
		t.Fatalf("get after delete: %v, want NotFound", err)
	}
}

func testListNamespaces(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.Open(t)
	base := s.Revision()
	for _, k := range []string{"b/web-2", "a/web-1", "a-b/x", "b/web-1", "a/web-0"} {
		ns, name, _ := strings.Cut(k, "/")
		MustCreate(t, s, NewPod(ns, name))
	}
	MustCreate(t, s, &api.ConfigMap{ObjectMeta: api.ObjectMeta{Namespace: "a", Name: "cfg"}})
	MustCreate(t, s, &api.Node{ObjectMeta: api.ObjectMeta{Name: "n1"}})

	tests := []struct {
		kind      *api.Kind
		namespace string
		want      []string
	}{
		{PodKind, "a", []string{"a/web-0", "a/web-1"}},
		{PodKind, "b", []string{"b/web-1", "b/web-2"}},
		{PodKind, "a-b", []string{"a-b/x"}},
		{PodKind, "none", nil},
		{PodKind, "", []string{"a-b/x", "a/web-0", "a/web-1", "b/web-1", "b/web-2"}},
		{CMKind, "", []string{"a/cfg"}},
		{NodeKind, "", []string{"n1"}},
		{EvKind, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.kind.Resource+"/"+tt.namespace, func(t *testing.T) {
			objs, rev, err := s.List(ctx, tt.kind, tt.namespace)
			if err != nil {
				t.Fatal(err)
			}
			if rev != base+7 {
				t.Fatalf("list revision = %d, want %d", rev, base+7)
			}
			var got []string
			for _, o := range objs {
				got = append(got, api.KeyOf(o))
				if o.GetTypeMeta().Kind != tt.kind.Kind {
					t.Errorf("%s: kind %q", api.KeyOf(o), o.GetTypeMeta().Kind)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("list = %v, want %v", got, tt.want)
			}
		})
	}
}

func testObjectsAreCopies(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.Open(t)
	in := NewPod("default", "web")
	out := MustCreate(t, s, in).(*api.Pod)
	if in.ResourceVersion != "" || in.UID != "" {
		t.Fatal("Create changed its argument")
	}
	in.Labels["app"] = "changed-input"
	out.Labels["app"] = "changed-output"
	got, _ := s.Get(ctx, PodKind, "default", "web")
	got.GetObjectMeta().Labels["app"] = "changed-get"
	again, _ := s.Get(ctx, PodKind, "default", "web")
	if again.GetObjectMeta().Labels["app"] != "web" {
		t.Fatalf("stored label = %q, want web", again.GetObjectMeta().Labels["app"])
	}
	upd := api.Clone(again)
	upd.GetObjectMeta().Labels["v"] = "2"
	before := RV(upd)
	if _, err := s.Update(ctx, upd); err != nil {
		t.Fatal(err)
	}
	if RV(upd) != before {
		t.Fatal("Update changed its argument")
	}
}

func testGuaranteedUpdate(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.Open(t)
	web := MustCreate(t, s, NewPod("default", "web"))

	t.Run("change", func(t *testing.T) {
		out, err := s.GuaranteedUpdate(ctx, PodKind, "default", "web", func(cur api.Object) (api.Object, error) {
			cur.GetObjectMeta().Labels["tier"] = "front"
			return cur, nil
		})
		if err != nil || out.GetObjectMeta().Labels["tier"] != "front" || Rev(t, out) != Rev(t, web)+1 {
			t.Fatalf("out %v, err %v", out, err)
		}
	})
	t.Run("no-op keeps the revision", func(t *testing.T) {
		before := s.Revision()
		out, err := s.GuaranteedUpdate(ctx, PodKind, "default", "web", func(cur api.Object) (api.Object, error) {
			cur.GetObjectMeta().Labels["tier"] = "front" // already so
			return cur, nil
		})
		if err != nil || s.Revision() != before || RV(out) != fmt.Sprint(before) {
			t.Fatalf("no-op: err %v, revision %d -> %d, rv %s", err, before, s.Revision(), RV(out))
		}
	})
	t.Run("retry on conflict", func(t *testing.T) {
		calls := 0
		out, err := s.GuaranteedUpdate(ctx, PodKind, "default", "web", func(cur api.Object) (api.Object, error) {
			calls++
			if calls == 1 { // someone else writes between our read and write
				other := api.Clone(cur)
				other.GetObjectMeta().Labels["other"] = "yes"
				if _, err := s.Update(ctx, other); err != nil {
					return nil, err
				}
			}
			cur.GetObjectMeta().Labels["mine"] = "yes"
			return cur, nil
		})
		if err != nil || calls != 2 {
			t.Fatalf("err %v, calls %d, want 2", err, calls)
		}
		l := out.GetObjectMeta().Labels
		if l["other"] != "yes" || l["mine"] != "yes" || Rev(t, out) != s.Revision() {
			t.Fatalf("labels = %v, rv %s; want both writes, the latest revision", l, RV(out))
		}
	})
	t.Run("error aborts", func(t *testing.T) {
		boom := errors.New("boom")
		before := s.Revision()
		_, err := s.GuaranteedUpdate(ctx, PodKind, "default", "web", func(api.Object) (api.Object, error) { return nil, boom })
		if !errors.Is(err, boom) || s.Revision() != before {
			t.Fatalf("err %v, revision %d -> %d", err, before, s.Revision())
		}
	})
	t.Run("rename rejected", func(t *testing.T) {
		before := s.Revision()
		_, err := s.GuaranteedUpdate(ctx, PodKind, "default", "web", func(cur api.Object) (api.Object, error) {
			cur.GetObjectMeta().Name = "other"
			return cur, nil
		})
		if api.ReasonOf(err) != api.ReasonBadRequest || s.Revision() != before {
			t.Fatalf("err %v, revision %d -> %d; want BadRequest, no write", err, before, s.Revision())
		}
	})
	t.Run("not found", func(t *testing.T) {
		_, err := s.GuaranteedUpdate(ctx, PodKind, "default", "nope", func(cur api.Object) (api.Object, error) { return cur, nil })
		if !api.IsNotFound(err) {
			t.Fatalf("err %v, want NotFound", err)
		}
	})
}

func testConcurrentWriters(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.Open(t)
	base := s.Revision()
	const writers, each = 32, 10
	var (
		mu   sync.Mutex
		revs = map[string]bool{}
		wg   sync.WaitGroup
		errs = make(chan error, writers)
	)
	record := func(o api.Object) bool {
		mu.Lock()
		defer mu.Unlock()
		dup := revs[RV(o)]
		revs[RV(o)] = true
		return !dup
	}
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				p, err := s.Create(ctx, NewPod(fmt.Sprintf("ns-%d", w%4), fmt.Sprintf("p-%d-%d", w, i)))
				if err != nil {
					errs <- err
					return
				}
				if !record(p) {
					errs <- fmt.Errorf("duplicate revision %s", RV(p))
					return
				}
				p.GetObjectMeta().Labels["n"] = "1"
				u, err := s.Update(ctx, p)
				if err != nil {
					errs <- err
					return
				}
				if !record(u) {
					errs <- fmt.Errorf("duplicate revision %s", RV(u))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if want := int64(2 * writers * each); s.Revision() != base+want || len(revs) != int(want) {
		t.Fatalf("revision %d, distinct revisions %d, want %d and %d", s.Revision(), len(revs), base+want, want)
	}
	objs, _, _ := s.List(ctx, PodKind, "")
	if len(objs) != writers*each {
		t.Fatalf("listed %d pods, want %d", len(objs), writers*each)
	}
}

func testConcurrentUpdatesSameVersion(t *testing.T, h Harness) {
	const writers = 32
	s := h.Open(t)
	base := MustCreate(t, s, NewPod("default", "web"))
	if wins := RacingUpdates(t, s, base, writers); wins != 1 || s.Revision() != Rev(t, base)+1 {
		t.Fatalf("%d winners, revision %d; want 1 winner, revision %d", wins, s.Revision(), Rev(t, base)+1)
	}
}

// RacingUpdates has writers goroutines update base at its resourceVersion
// at once, each setting its own label, and returns how many won. Every
// loser must fail with Conflict: optimistic concurrency lets exactly one
// through.
func RacingUpdates(t *testing.T, s store.Store, base api.Object, writers int) (wins int) {
	t.Helper()
	var wg sync.WaitGroup
	results := make(chan error, writers)
	for i := range writers {
		wg.Go(func() {
			p := api.Clone(base)
			p.GetObjectMeta().Labels["writer"] = fmt.Sprint(i)
			_, err := s.Update(context.Background(), p)
			results <- err
		})
	}
	wg.Wait()
	close(results)
	for err := range results {
		switch {
		case err == nil:
			wins++
		case !api.IsConflict(err):
			t.Fatalf("err = %v, want Conflict", err)
		}
	}
	return wins
}

func testPersistence(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.Open(t)
	web := MustCreate(t, s, NewPod("default", "web"))
	MustCreate(t, s, NewPod("default", "gone"))
	MustCreate(t, s, &api.Node{ObjectMeta: api.ObjectMeta{Name: "n1"}})
	if _, err := s.Delete(ctx, PodKind, "default", "gone", nil); err != nil {
		t.Fatal(err)
	}
	rev := s.Revision()
	s = h.Reopen(t, s)
	if s.Revision() != rev {
		t.Fatalf("revision after reopen = %d, want %d", s.Revision(), rev)
	}
	got, err := s.Get(ctx, PodKind, "default", "web")
	if err != nil || got.GetObjectMeta().UID != web.GetObjectMeta().UID || RV(got) != RV(web) {
		t.Fatalf("web after reopen: %v, %v", got, err)
	}
	if _, err := s.Get(ctx, PodKind, "default", "gone"); !api.IsNotFound(err) {
		t.Fatalf("deleted pod after reopen: %v", err)
	}
	if _, err := s.Get(ctx, NodeKind, "", "n1"); err != nil {
		t.Fatal(err)
	}
	if p := MustCreate(t, s, NewPod("default", "new")); Rev(t, p) != rev+1 {
		t.Fatalf("first write after reopen has resourceVersion %s, want %d", RV(p), rev+1)
	}
}

func testClose(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.Open(t)
	MustCreate(t, s, NewPod("default", "web"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	tests := []struct {
		name string
		do   func() error
	}{
		{"create", func() error { _, err := s.Create(ctx, NewPod("default", "x")); return err }},
		{"update", func() error { _, err := s.Update(ctx, NewPod("default", "web")); return err }},
		{"delete", func() error { _, err := s.Delete(ctx, PodKind, "default", "web", nil); return err }},
		{"get", func() error { _, err := s.Get(ctx, PodKind, "default", "web"); return err }},
		{"list", func() error { _, _, err := s.List(ctx, PodKind, ""); return err }},
		{"watch", func() error { _, err := s.Watch(ctx, PodKind, "", 0); return err }},
		{"wait", func() error { return s.WaitForRevision(ctx, s.Revision()+1) }},
	}
	for _, tt := range tests {
		if err := tt.do(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after close: %v, want ErrClosed", tt.name, err)
		}
	}
}

func testContextCanceled(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Get(ctx, PodKind, "default", "web"); !errors.Is(err, context.Canceled) {
		t.Fatalf("get: %v, want context.Canceled", err)
	}
	if _, _, err := s.List(ctx, PodKind, ""); !errors.Is(err, context.Canceled) {
		t.Fatalf("list: %v, want context.Canceled", err)
	}
	if _, err := s.Watch(ctx, PodKind, "", 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("watch: %v, want context.Canceled", err)
	}
}

func testWatchFromNow(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.Open(t)
	MustCreate(t, s, NewPod("default", "before")) // not seen: before the watch
	ch, err := s.Watch(ctx, PodKind, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	p := MustCreate(t, s, NewPod("default", "web"))
	p.GetObjectMeta().Labels["v"] = "2"
	if _, err := s.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	del, err := s.Delete(ctx, PodKind, "default", "web", nil)
	if err != nil {
		t.Fatal(err)
	}
	if e := ExpectNext(t, ch, api.Added, "web"); e.Revision != Rev(t, p) {
		t.Fatalf("added event revision %d, want %d", e.Revision, Rev(t, p))
	}
	if e := ExpectNext(t, ch, api.Modified, "web"); e.Object.GetObjectMeta().Labels["v"] != "2" {
		t.Fatalf("modified object labels = %v", e.Object.GetObjectMeta().Labels)
	}
	e := ExpectNext(t, ch, api.Deleted, "web")
	if RV(e.Object) != RV(del) || e.Object.GetObjectMeta().Labels["v"] != "2" {
		t.Fatalf("deleted event rv %s labels %v, want %s and the last state", RV(e.Object), e.Object.GetObjectMeta().Labels, RV(del))
	}
}

func testWatchFromFuture(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.Open(t)
	ch, err := s.Watch(ctx, PodKind, "", s.Revision()+2)
	if err != nil {
		t.Fatalf("watch from a future revision: %v", err)
	}
	for i := range 3 {
		MustCreate(t, s, NewPod("default", fmt.Sprintf("p%d", i)))
	}
	ExpectNext(t, ch, api.Added, "p2") // p0 and p1 are not after the revision asked for
}

func testWatchReplay(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.Open(t)
	base := s.Revision()
	for i := range 8 {
		MustCreate(t, s, NewPod("default", fmt.Sprintf("p%d", i))) // revisions base+1..base+8
	}
	h.Compact(t, s, base+3)
	tests := []struct {
		rev      int64
		gone     bool
		wantFrom int // first pod replayed
	}{
		{rev: base + 1, gone: true},
		{rev: base + 2, gone: true},
		{rev: base + 3, wantFrom: 3},
		{rev: base + 6, wantFrom: 6},
		{rev: base + 8, wantFrom: 8}, // nothing to replay
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint("from ", tt.rev-base), func(t *testing.T) {
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			ch, err := s.Watch(wctx, PodKind, "default", tt.rev)
			if tt.gone {
				if !api.IsGone(err) || api.CodeOf(err) != 410 {
					t.Fatalf("err = %v, want 410 Gone", err)
				}
				if want := fmt.Sprintf("too old resource version: %d (%d)", tt.rev, base+3); err.Error() != want {
					t.Fatalf("message %q, want %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := tt.wantFrom; i < 8; i++ {
				if e := ExpectNext(t, ch, api.Added, fmt.Sprintf("p%d", i)); e.Revision != base+int64(i+1) {
					t.Fatalf("revision %d, want %d", e.Revision, base+int64(i+1))
				}
			}
		})
	}
	// A watcher that replays and then sees live events, without a gap.
	ch, err := s.Watch(ctx, PodKind, "default", base+7)
	if err != nil {
		t.Fatal(err)
	}
	MustCreate(t, s, NewPod("default", "live"))
	ExpectNext(t, ch, api.Added, "p7")
	ExpectNext(t, ch, api.Added, "live")
}

func testWatchFilters(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.Open(t)
	inA, err := s.Watch(ctx, PodKind, "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	all, err := s.Watch(ctx, PodKind, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := s.Watch(ctx, NodeKind, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	MustCreate(t, s, NewPod("b", "in-b"))
	MustCreate(t, s, NewPod("a-b", "in-a-b"))
	MustCreate(t, s, &api.ConfigMap{ObjectMeta: api.ObjectMeta{Namespace: "a", Name: "cm"}})
	MustCreate(t, s, NewPod("a", "in-a"))
	MustCreate(t, s, &api.Node{ObjectMeta: api.ObjectMeta{Name: "n1"}})

	ExpectNext(t, inA, api.Added, "in-a") // neither b's nor a-b's pod, nor a's configmap
	ExpectNext(t, all, api.Added, "in-b")
	ExpectNext(t, all, api.Added, "in-a-b")
	ExpectNext(t, all, api.Added, "in-a")
	ExpectNext(t, nodes, api.Added, "n1")
}

func testWatchEventsAreNotTheWriters(t *testing.T, h Harness) {
	// Watchers may share one object per change (they never modify it);
	// what they must not share is the object the writer passed in or got
	// back, which the writer owns and may change.
	ctx := context.Background()
	s := h.Open(t)
	w1, err := s.Watch(ctx, PodKind, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	w2, err := s.Watch(ctx, PodKind, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	in := NewPod("default", "web")
	out := MustCreate(t, s, in)
	in.Labels["app"] = "changed-in"
	out.GetObjectMeta().Labels["app"] = "changed-out"
	for i, e := range []store.Event{Next(t, w1), Next(t, w2)} {
		if got := e.Object.GetObjectMeta().Labels["app"]; got != "web" {
			t.Errorf("watcher %d: label app %q, want %q: the event shares the writer's object", i+1, got, "web")
		}
	}
}

func testWatchStops(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := s.Watch(ctx, PodKind, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.Watch(context.Background(), PodKind, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	for range ch { // drains to the close
	}
	MustCreate(t, s, NewPod("default", "web"))
	ExpectNext(t, other, api.Added, "web") // the other watch goes on
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	closed := false
	testwait.For(t, 10*time.Second, "the watch channel to close after Close", func() bool {
		select {
		case _, ok := <-other:
			closed = !ok
		default:
		}
		return closed
	})
}

func testWaitForRevision(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.Open(t)
	rev := Rev(t, MustCreate(t, s, NewPod("default", "a")))

	// Reached already: returns at once, even with a context that has ended.
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.WaitForRevision(done, rev); err != nil {
		t.Fatalf("reached revision: %v", err)
	}
	// Not reached and nothing written: the context's error.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
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
	MustCreate(t, s, NewPod("default", "b"))
	MustCreate(t, s, NewPod("default", "c"))
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-time.After(10 * time.Second):
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
		if !errors.Is(err, store.ErrClosed) {
			t.Fatalf("waiter after close: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter not woken by Close")
	}
}

func testListExact(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.Open(t)
	base := s.Revision()
	MustCreate(t, s, NewPod("default", "a"))                                                            // 1
	MustCreate(t, s, NewPod("other", "b"))                                                              // 2
	cm := MustCreate(t, s, &api.ConfigMap{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: "c"}}) // 3
	cm.GetObjectMeta().Labels = map[string]string{"v": "2"}
	if _, err := s.Update(ctx, cm); err != nil { // 4
		t.Fatal(err)
	}
	// history is what a store answers for a revision after which the kind
	// changed: the past objects when it keeps them, else Gone.
	history := func(names ...string) ([]string, func(error) bool) {
		if h.MultiVersion {
			return names, nil
		}
		return nil, api.IsGone
	}
	allAt1, allAt1Err := history("a")
	cmAt3, cmAt3Err := history("c")
	tests := []struct {
		name      string
		kind      *api.Kind
		namespace string
		rev       int64
		want      []string // names, or nil with wantErr
		wantErr   func(error) bool
		wantLabel string // the configmap's label v
	}{
		{name: "current revision", kind: PodKind, rev: 4, want: []string{"a", "b"}},
		{name: "pods unchanged since 2", kind: PodKind, rev: 2, want: []string{"a", "b"}},
		{name: "default pods unchanged since 1", kind: PodKind, namespace: "default", rev: 1, want: []string{"a"}},
		{name: "all pods changed after 1", kind: PodKind, rev: 1, want: allAt1, wantErr: allAt1Err},
		{name: "configmap changed after 3", kind: CMKind, rev: 3, want: cmAt3, wantErr: cmAt3Err},
		{name: "configmap now", kind: CMKind, rev: 4, want: []string{"c"}, wantLabel: "2"},
		{name: "future revision", kind: PodKind, rev: 5, wantErr: api.IsTooLargeResourceVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			items, err := s.ListExact(ctx, tt.kind, tt.namespace, base+tt.rev)
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
				if tt.kind == CMKind && o.GetObjectMeta().Labels["v"] != tt.wantLabel {
					t.Errorf("configmap at %d has label v=%q, want %q", tt.rev, o.GetObjectMeta().Labels["v"], tt.wantLabel)
				}
				if r := Rev(t, o); r > base+tt.rev {
					t.Errorf("%s has resourceVersion %d, after the list's %d", api.KeyOf(o), r, base+tt.rev)
				}
			}
			if fmt.Sprint(names) != fmt.Sprint(tt.want) {
				t.Fatalf("names = %v, want %v", names, tt.want)
			}
		})
	}
	if _, err := s.ListExact(ctx, PodKind, "", 0); api.CodeOf(err) != 400 {
		t.Fatalf("revision 0: %v, want 400", err)
	}
	// Past the history: Gone even though the pods did not change.
	h.Compact(t, s, base+4)
	if _, err := s.ListExact(ctx, PodKind, "", base+2); !api.IsGone(err) || err.Error() != store.ErrListTooOld().Error() {
		t.Fatalf("revision older than the history: %v, want Gone", err)
	}
	if items, err := s.ListExact(ctx, PodKind, "", base+4); err != nil || len(items) != 2 {
		t.Fatalf("the compacted revision itself: %d items, %v", len(items), err)
	}
}

func testExpireEvents(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.Open(t)
	now := time.Now()
	MustCreate(t, s, NewEvent("a", time.Time{}))
	ev := MustCreate(t, s, NewEvent("b", now))
	ev.(*api.Event).Count = 2 // an updated Event expires too
	if _, err := s.Update(ctx, ev); err != nil {
		t.Fatal(err)
	}
	MustCreate(t, s, NewPod("default", "web")) // pods never expire
	ch, err := s.Watch(ctx, EvKind, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	h.ExpireEvents(t, s)

	// Expiry is a delete like any other: watchers see it.
	var deleted []string
	for range 2 {
		e := Next(t, ch)
		if e.Type != api.Deleted {
			t.Fatalf("event %s %s, want Deleted", e.Type, e.Object.GetObjectMeta().Name)
		}
		deleted = append(deleted, e.Object.GetObjectMeta().Name)
	}
	slices.Sort(deleted)
	if fmt.Sprint(deleted) != "[a b]" {
		t.Fatalf("deleted %v, want [a b]", deleted)
	}
	if objs, _, err := s.List(ctx, EvKind, ""); err != nil || len(objs) != 0 {
		t.Fatalf("events left: %d, %v", len(objs), err)
	}
	if _, err := s.Get(ctx, PodKind, "default", "web"); err != nil {
		t.Fatalf("pod after expiry: %v", err)
	}
	// Events written after an expiry get their own lifetime.
	MustCreate(t, s, NewEvent("c", time.Time{}))
	if _, err := s.Get(ctx, EvKind, "default", "c"); err != nil {
		t.Fatalf("new event: %v", err)
	}
}
