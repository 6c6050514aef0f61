package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/store"
	st "skiff.dev/skiff/controlplane/store/storetest"
	"skiff.dev/skiff/internal/testwait"
)

// Tests of what only the bbolt store does: group commit, its in-memory
// history ring, its statistics, the Event sweeper by lastTimestamp.

func TestGroupCommitStats(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t, testOptions())
	const writers, each = 64, 10
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if _, err := s.Create(ctx, st.NewPod("default", fmt.Sprintf("p-%d-%d", w, i))); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	stats := s.Stats()
	t.Logf("stats: %+v", stats)
	if stats.Writes != writers*each || stats.Commits > stats.Batches || stats.Revision != writers*each {
		t.Fatalf("stats = %+v", stats)
	}
}

func TestConcurrentUpdatesOneBatch(t *testing.T) {
	const writers = 64
	s, path := openStore(t, testOptions())
	base := st.MustCreate(t, s, st.NewPod("default", "web"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A long delay with MaxBatch = writers puts every update in one
	// batch: the conflicts are found inside the transaction.
	opts := testOptions()
	opts.MaxBatch, opts.MaxBatchDelay = writers, time.Minute
	s = reopen(t, path, opts)
	wins := st.RacingUpdates(t, s, base, writers)
	if wins != 1 || s.Revision() != 2 {
		t.Fatalf("%d winners, revision %d; want 1 winner, revision 2", wins, s.Revision())
	}
	if n := s.Stats().Batches; n != 1 {
		t.Fatalf("%d batches, want 1", n)
	}
}

func TestBatchFailureIsPerWrite(t *testing.T) {
	ctx := context.Background()
	opts := testOptions()
	opts.MaxBatch, opts.MaxBatchDelay = 3, time.Minute // three writes form exactly one batch
	s, _ := openStore(t, opts)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, name := range []string{"a", "a", "b"} {
		wg.Go(func() {
			_, errs[i] = s.Create(ctx, st.NewPod("default", name))
		})
	}
	wg.Wait()
	failed := 0
	for _, err := range errs {
		if err != nil {
			if !api.IsAlreadyExists(err) {
				t.Fatalf("err = %v, want AlreadyExists", err)
			}
			failed++
		}
	}
	stats := s.Stats()
	if failed != 1 || stats.Batches != 1 || stats.Commits != 1 || stats.Writes != 2 || stats.FailedWrites != 1 || s.Revision() != 2 {
		t.Fatalf("failed %d, stats %+v; want one failure in one committed batch of two writes", failed, stats)
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := store.DefaultOptions().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	bad := store.Options{HistorySize: -1, WatchBuffer: -1, MaxBatch: -1, MaxBatchDelay: -1, EventTTL: -1, SweepInterval: -1}
	err := bad.Validate()
	if err == nil {
		t.Fatal("negative options accepted")
	}
	for _, field := range []string{"history size", "watch buffer", "max batch", "max batch delay", "event ttl", "sweep interval"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error %q does not name %q", err, field)
		}
	}
	if _, err := store.Open(t.TempDir()+"/x.db", bad); err == nil {
		t.Fatal("Open accepted invalid options")
	}
}

func TestWatchHistorySize(t *testing.T) {
	ctx := context.Background()
	opts := testOptions()
	opts.HistorySize = 5
	s, _ := openStore(t, opts)
	for i := range 8 {
		st.MustCreate(t, s, st.NewPod("default", fmt.Sprintf("p%d", i))) // revisions 1..8; history keeps 4..8
	}
	tests := []struct {
		rev      int64
		gone     bool
		wantFrom int
	}{
		{rev: 2, gone: true},
		{rev: 3, wantFrom: 3},
		{rev: 7, wantFrom: 7},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint("from ", tt.rev), func(t *testing.T) {
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			ch, err := s.Watch(wctx, st.PodKind, "default", tt.rev)
			if tt.gone {
				if want := fmt.Sprintf("too old resource version: %d (3)", tt.rev); !api.IsGone(err) || err.Error() != want {
					t.Fatalf("err = %v, want Gone %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := tt.wantFrom; i < 8; i++ {
				st.ExpectNext(t, ch, api.Added, fmt.Sprintf("p%d", i))
			}
		})
	}
}

func TestListExactPastTheRing(t *testing.T) {
	ctx := context.Background()
	opts := testOptions()
	opts.HistorySize = 4
	s, _ := openStore(t, opts)
	a := st.MustCreate(t, s, st.NewPod("default", "a"))
	cm := st.MustCreate(t, s, &api.ConfigMap{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: "c"}})
	if _, err := s.ListExact(ctx, st.PodKind, "", st.Rev(t, a)); err != nil {
		t.Fatalf("within the history: %v", err)
	}
	for range 4 {
		cm.GetObjectMeta().ResourceVersion = ""
		if cm.GetObjectMeta().Labels == nil {
			cm.GetObjectMeta().Labels = map[string]string{}
		}
		cm.GetObjectMeta().Labels["v"] += "x"
		if _, err := s.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.ListExact(ctx, st.PodKind, "", st.Rev(t, a)); !api.IsGone(err) {
		t.Fatalf("revision older than the history: %v, want Gone", err)
	}
}

func TestWatchGoneAfterReopen(t *testing.T) {
	ctx := context.Background()
	s, path := openStore(t, testOptions())
	for i := range 3 {
		st.MustCreate(t, s, st.NewPod("default", fmt.Sprintf("p%d", i)))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, path, testOptions())
	if _, err := s.Watch(ctx, st.PodKind, "", 2); !api.IsGone(err) {
		t.Fatalf("watch from 2 after reopen at 3: %v, want Gone", err)
	}
	ch, err := s.Watch(ctx, st.PodKind, "", 3)
	if err != nil {
		t.Fatalf("watch from the current revision: %v", err)
	}
	st.MustCreate(t, s, st.NewPod("default", "p3"))
	if e := st.ExpectNext(t, ch, api.Added, "p3"); e.Revision != 4 {
		t.Fatalf("revision %d, want 4", e.Revision)
	}
}

func TestSlowWatcherIsClosed(t *testing.T) {
	opts := testOptions()
	opts.WatchBuffer = 4
	s, _ := openStore(t, opts)
	ctx := context.Background()
	slow, err := s.Watch(ctx, st.PodKind, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	fast, err := s.Watch(ctx, st.PodKind, "", 0)
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
		if _, err := s.Create(wctx, st.NewPod("default", name)); err != nil {
			t.Fatalf("write %d blocked by a slow watcher: %v", i, err)
		}
		st.ExpectNext(t, fast, api.Added, name)
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
	if stats := s.Stats(); stats.SlowWatchersClosed != 1 {
		t.Fatalf("stats %+v, want one slow watcher closed", stats)
	}
	// It resumes from its last revision.
	resumed, err := s.Watch(ctx, st.PodKind, "", last)
	if err != nil {
		t.Fatal(err)
	}
	if e := st.Next(t, resumed); e.Revision != last+1 {
		t.Fatalf("resumed at %d, want %d", e.Revision, last+1)
	}
}

func TestWatcherCount(t *testing.T) {
	s, _ := openStore(t, testOptions())
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := s.Watch(ctx, st.PodKind, "", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Watch(context.Background(), st.PodKind, "", 0); err != nil {
		t.Fatal(err)
	}
	if n := s.Stats().Watchers; n != 2 {
		t.Fatalf("watchers = %d, want 2", n)
	}
	cancel()
	testwait.For(t, 5*time.Second, "watcher count to drop", func() bool { return s.Stats().Watchers == 1 })
}

// Count counts what List lists, in one namespace (not one whose name
// starts the same) or all, without decoding.
func TestCountIsListsLength(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t, testOptions())
	podKind := api.MustKindOf(&api.Pod{})
	for ns, n := range map[string]int{"a": 3, "ab": 2, "b": 0, "default": 1} {
		for i := range n {
			st.MustCreate(t, s, st.NewPod(ns, fmt.Sprintf("p%d", i)))
		}
	}
	var _ store.Counter = s
	for _, ns := range []string{"a", "ab", "b", "default", "none", ""} {
		items, _, err := s.List(ctx, podKind, ns)
		if err != nil {
			t.Fatal(err)
		}
		n, err := s.Count(ctx, podKind, ns)
		if err != nil || n != len(items) {
			t.Errorf("Count(pods, %q) = %d, %v; List has %d", ns, n, err, len(items))
		}
	}
	if n, err := s.Count(ctx, api.MustKindOf(&api.ConfigMap{}), ""); err != nil || n != 0 {
		t.Errorf("Count of a kind never written = %d, %v; want 0", n, err)
	}
	if n, _ := s.Count(ctx, podKind, ""); n != 6 {
		t.Errorf("Count(pods, all) = %d; want 6", n)
	}
}

// TestGetMemoIsExact: Gets of namespaces and ServiceAccounts reuse a
// decoded copy while the stored bytes are unchanged (memo.go); each Get
// still returns a private object, and every kind of write is seen by the
// next Get.
func TestGetMemoIsExact(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t, testOptions())
	nsKind := api.MustKindOf(&api.Namespace{})
	ns := st.MustCreate(t, s, &api.Namespace{ObjectMeta: api.ObjectMeta{Name: "lab", Labels: map[string]string{"course": "k8s"}}})
	get := func() *api.Namespace {
		t.Helper()
		o, err := s.Get(ctx, nsKind, "", "lab")
		if err != nil {
			t.Fatal(err)
		}
		return o.(*api.Namespace)
	}
	first := get()
	first.Labels["course"] = "changed by the caller"
	first.Status.Phase = api.NamespaceTerminating
	if got := get(); got.Labels["course"] != "k8s" || got.Status.Phase != "" || got.ResourceVersion != ns.GetObjectMeta().ResourceVersion {
		t.Fatalf("second Get = labels %v, phase %q, rv %s: a caller's change leaked into the memo", got.Labels, got.Status.Phase, got.ResourceVersion)
	}

	upd := get()
	upd.Labels["course"] = "updated"
	if _, err := s.Update(ctx, upd); err != nil {
		t.Fatal(err)
	}
	if got := get(); got.Labels["course"] != "updated" {
		t.Fatalf("after Update: labels %v", got.Labels)
	}
	if _, err := s.GuaranteedUpdate(ctx, nsKind, "", "lab", func(cur api.Object) (api.Object, error) {
		cur.(*api.Namespace).Status.Phase = api.NamespaceTerminating
		return cur, nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := get(); got.Status.Phase != api.NamespaceTerminating {
		t.Fatalf("after GuaranteedUpdate: phase %q", got.Status.Phase)
	}
	if _, err := s.Delete(ctx, nsKind, "", "lab", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, nsKind, "", "lab"); !api.IsNotFound(err) {
		t.Fatalf("Get after Delete: %v, want NotFound", err)
	}
	again := st.MustCreate(t, s, &api.Namespace{ObjectMeta: api.ObjectMeta{Name: "lab"}})
	if got := get(); got.UID != again.GetObjectMeta().UID || len(got.Labels) != 0 || got.Status.Phase != "" {
		t.Fatalf("after re-create: uid %s (want %s), labels %v, phase %q", got.UID, again.GetObjectMeta().UID, got.Labels, got.Status.Phase)
	}
}

// TestGetShared: GetShared hands out the memo's object itself, the same
// one to every reader while the stored bytes are unchanged (without a
// transaction while nothing of its kind was written), never Get's;
// a write is seen by the next GetShared and leaves what readers hold as it
// was. Kinds without a memo, and keys past its bound, still answer.
func TestGetShared(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t, testOptions())
	var _ store.SharedGetter = s
	nsKind := api.MustKindOf(&api.Namespace{})
	st.MustCreate(t, s, &api.Namespace{ObjectMeta: api.ObjectMeta{Name: "lab", Labels: map[string]string{"course": "k8s"}}})
	shared := func() *api.Namespace {
		t.Helper()
		o, err := s.GetShared(ctx, nsKind, "", "lab")
		if err != nil {
			t.Fatal(err)
		}
		return o.(*api.Namespace)
	}
	first := shared()
	txs := store.ReadTransactions(s)
	if second := shared(); second != first {
		t.Fatal("two GetShared of an unchanged namespace returned two objects")
	}
	if n := store.ReadTransactions(s) - txs; n != 0 {
		t.Fatalf("a GetShared with nothing written since began %d read transactions, want none (the count of writes says the memo holds)", n)
	}
	other := st.MustCreate(t, s, &api.Namespace{ObjectMeta: api.ObjectMeta{Name: "other"}})
	if got := shared(); got != first {
		t.Fatal("another namespace's create: GetShared decoded this one again")
	}
	if _, err := s.Delete(ctx, nsKind, "", other.GetObjectMeta().Name, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, nsKind, "", "lab"); err != nil || got == api.Object(first) {
		t.Fatalf("Get = %p, %v: want a copy of its own", got, err)
	}
	upd := api.Clone(first)
	upd.Labels["course"] = "updated"
	if _, err := s.Update(ctx, upd); err != nil {
		t.Fatal(err)
	}
	if got := shared(); got == first || got.Labels["course"] != "updated" {
		t.Fatalf("after Update: labels %v (same object: %v)", got.Labels, got == first)
	}
	if first.Labels["course"] != "k8s" {
		t.Fatalf("the object a reader held changed to %v", first.Labels)
	}
	if _, err := s.Delete(ctx, nsKind, "", "lab", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetShared(ctx, nsKind, "", "lab"); !api.IsNotFound(err) {
		t.Fatalf("GetShared after Delete: %v, want NotFound", err)
	}
	st.MustCreate(t, s, st.NewPod("default", "web"))
	if o, err := s.GetShared(ctx, st.PodKind, "default", "web"); err != nil || o.GetObjectMeta().Name != "web" {
		t.Fatalf("GetShared of a pod = %v, %v", o, err)
	}
	for i := range store.MemoMaxEntries + 1 {
		st.MustCreate(t, s, &api.Namespace{ObjectMeta: api.ObjectMeta{Name: fmt.Sprintf("ns-%d", i)}})
		if _, err := s.GetShared(ctx, nsKind, "", fmt.Sprintf("ns-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	past := fmt.Sprintf("ns-%d", store.MemoMaxEntries)
	a, err := s.GetShared(ctx, nsKind, "", past)
	if err != nil || a.GetObjectMeta().Name != past {
		t.Fatalf("GetShared past the memo's bound = %v, %v", a, err)
	}
}

// TestGetMeta: the metadata of what Get returns, and nothing else.
func TestGetMeta(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t, testOptions())
	var _ store.MetaGetter = s
	st.MustCreate(t, s, st.NewPod("default", "web"))
	full, err := s.Get(ctx, st.PodKind, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	meta, err := s.GetMeta(ctx, st.PodKind, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	want := &api.Pod{TypeMeta: full.(*api.Pod).TypeMeta, ObjectMeta: full.(*api.Pod).ObjectMeta}
	if !reflect.DeepEqual(meta, want) || want.Name != "web" || want.ResourceVersion == "" || want.APIVersion != "v1" {
		t.Fatalf("GetMeta = %+v\nwant %+v", meta, want)
	}
	if _, err := s.GetMeta(ctx, st.PodKind, "default", "gone"); !api.IsNotFound(err) {
		t.Fatalf("GetMeta of a missing pod: %v, want NotFound", err)
	}
}

// TestGetMemoBounded: the memo stops growing at its bound (Gets past it
// still answer), and forgets an object a Get finds gone.
func TestGetMemoBounded(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t, testOptions())
	nsKind := api.MustKindOf(&api.Namespace{})
	n := store.MemoMaxEntries + 10
	for i := range n {
		st.MustCreate(t, s, &api.Namespace{ObjectMeta: api.ObjectMeta{Name: fmt.Sprintf("ns-%d", i)}})
	}
	for i := range n {
		o, err := s.Get(ctx, nsKind, "", fmt.Sprintf("ns-%d", i))
		if err != nil || o.GetObjectMeta().Name != fmt.Sprintf("ns-%d", i) {
			t.Fatalf("Get ns-%d = %v, %v", i, o, err)
		}
	}
	if got := store.MemoLen(s); got != store.MemoMaxEntries {
		t.Fatalf("memo holds %d entries after %d Gets, want its bound %d", got, n, store.MemoMaxEntries)
	}
	if _, err := s.Delete(ctx, nsKind, "", "ns-0", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, nsKind, "", "ns-0"); !api.IsNotFound(err) {
		t.Fatalf("Get of a deleted namespace: %v", err)
	}
	if got := store.MemoLen(s); got != store.MemoMaxEntries-1 {
		t.Fatalf("memo holds %d entries after a Get found ns-0 gone, want %d", got, store.MemoMaxEntries-1)
	}
}

// CreateEncoded stores the object it is given, not a copy, and hands back
// the JSON it stored: encoding/json's Marshal of the object it returns,
// which the API server sends as the response. A failed create hands back
// none.
func TestCreateEncodedIsMarshal(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t, testOptions())
	given := benchPod(t, "web-1")
	out, raw, err := s.CreateEncoded(ctx, given, false)
	if err != nil {
		t.Fatal(err)
	}
	if out != api.Object(given) || given.ResourceVersion == "" {
		t.Fatalf("CreateEncoded returned another object than it was given, or left its resourceVersion empty (%q)", given.ResourceVersion)
	}
	want, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != string(want) {
		t.Fatalf("CreateEncoded's JSON is not Marshal of its object:\n%s\n%s", raw, want)
	}
	got, err := s.Get(ctx, api.MustKindOf(&api.Pod{}), "default", "web-1")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(got); string(b) != string(raw) {
		t.Fatalf("a Get of the created pod encodes to other JSON:\n%s\n%s", b, raw)
	}
	if _, raw, err := s.CreateEncoded(ctx, benchPod(t, "web-1"), false); !api.IsAlreadyExists(err) || raw != nil {
		t.Fatalf("create again: err %v, %d bytes of JSON; want AlreadyExists and none", err, len(raw))
	}
}

// A shared create's object is the one its live watchers get; an unshared
// one's watchers get a copy, which the writer may go on changing.
func TestCreateEncodedShare(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, _ := openStore(t, testOptions())
	podKind := api.MustKindOf(&api.Pod{})
	ch, err := s.Watch(ctx, podKind, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, share := range []bool{true, false} {
		out, _, err := s.CreateEncoded(ctx, benchPod(t, fmt.Sprint("web-", share)), share)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-ch:
			if same := ev.Object == out; same != share {
				t.Fatalf("share %v: the watcher's object is the writer's: %v", share, same)
			}
			if ev.Object.GetObjectMeta().ResourceVersion != out.GetObjectMeta().ResourceVersion {
				t.Fatalf("share %v: the watcher's resourceVersion %q, the writer's %q", share,
					ev.Object.GetObjectMeta().ResourceVersion, out.GetObjectMeta().ResourceVersion)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("share %v: no event", share)
		}
	}
}

// GuaranteedUpdateShared (store.SharingUpdater, the API server's binding)
// gives the live watchers the object tryUpdate returned; GuaranteedUpdate
// gives them a copy, its caller keeping the object. Either way the watcher
// sees what was stored.
func TestGuaranteedUpdateShared(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, _ := openStore(t, testOptions())
	var _ store.SharingUpdater = s
	podKind := api.MustKindOf(&api.Pod{})
	created := st.MustCreate(t, s, benchPod(t, "web"))
	rev, err := strconv.ParseInt(created.GetObjectMeta().ResourceVersion, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := s.Watch(ctx, podKind, "", rev)
	if err != nil {
		t.Fatal(err)
	}
	for _, share := range []bool{true, false} {
		var written api.Object
		label := func(cur api.Object) (api.Object, error) {
			cur.GetObjectMeta().Labels["shared"] = fmt.Sprint(share)
			written = cur
			return cur, nil
		}
		if share {
			err = s.GuaranteedUpdateShared(ctx, podKind, "default", "web", label)
		} else {
			_, err = s.GuaranteedUpdate(ctx, podKind, "default", "web", label)
		}
		if err != nil {
			t.Fatal(err)
		}
		stored, err := s.Get(ctx, podKind, "default", "web")
		if err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-ch:
			if same := ev.Object == written; same != share {
				t.Fatalf("share %v: the watcher's object is the one written: %v", share, same)
			}
			if !reflect.DeepEqual(ev.Object, stored) {
				t.Fatalf("share %v: the watcher's object\n%+v\nthe stored one\n%+v", share, ev.Object, stored)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("share %v: no event", share)
		}
	}
}

// GuaranteedUpdateReadOnly (store.ReadOnlyUpdater, the API server's pod
// status write) gives tryUpdate the object the live watchers got from the
// last write, not a copy; what it writes is what tryUpdate returns, and a
// tryUpdate that returns cur itself (nothing to change) gets a copy back,
// never the shared object.
func TestGuaranteedUpdateReadOnly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, _ := openStore(t, testOptions())
	var _ store.ReadOnlyUpdater = s
	podKind := api.MustKindOf(&api.Pod{})
	ch, err := s.Watch(ctx, podKind, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	st.MustCreate(t, s, benchPod(t, "web"))
	next := func() api.Object {
		t.Helper()
		select {
		case ev := <-ch:
			return ev.Object
		case <-time.After(10 * time.Second):
			t.Fatal("no event")
			return nil
		}
	}
	live := next()
	var got api.Object
	out, err := s.GuaranteedUpdateReadOnly(ctx, podKind, "default", "web", func(cur api.Object) (api.Object, error) {
		got = cur
		p := api.Clone(cur).(*api.Pod)
		p.Status.Phase = api.PodRunning
		return p, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got != live {
		t.Fatal("tryUpdate got a copy of the last write, not the watchers' object")
	}
	if live.(*api.Pod).Status.Phase == api.PodRunning {
		t.Fatal("the watchers' object of the last write changed")
	}
	stored, err := s.Get(ctx, podKind, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, stored) || stored.(*api.Pod).Status.Phase != api.PodRunning {
		t.Fatalf("wrote\n%+v\nstored\n%+v", out, stored)
	}
	live = next()
	// A watcher reads its object while the no-op update runs: the store
	// must not write the shared object either (go test -race sees it).
	read := make(chan string)
	go func() { read <- live.GetTypeMeta().Kind + live.GetObjectMeta().ResourceVersion }()
	same, err := s.GuaranteedUpdateReadOnly(ctx, podKind, "default", "web", func(cur api.Object) (api.Object, error) { return cur, nil })
	<-read
	if err != nil {
		t.Fatal(err)
	}
	if same == live || !reflect.DeepEqual(same, live) {
		t.Fatalf("a tryUpdate that returned cur got back the shared object (%v) or another one (%v)", same == live, !reflect.DeepEqual(same, live))
	}
}

// ListFiltered hands keep the JSON of every object List would list,
// decompressed, and decodes those keep takes: the same objects as List's,
// in the same order.
func TestListFilteredDecodesWhatKeepTakes(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t, testOptions())
	podKind := api.MustKindOf(&api.Pod{})
	var _ store.FilteredLister = s
	for i := range 40 {
		p := st.NewPod("a", fmt.Sprintf("p%02d", i))
		p.Spec.NodeName = fmt.Sprintf("node-%d", i%3)
		if i%2 == 0 { // some large, some small
			p.Annotations = map[string]string{"note": strings.Repeat("a lab pod ", 200)}
		}
		st.MustCreate(t, s, p)
	}
	st.MustCreate(t, s, st.NewPod("b", "other"))
	all, rev, err := s.List(ctx, podKind, "a")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	got, frev, err := s.ListFiltered(ctx, podKind, "a", func(raw []byte) bool {
		seen++
		var p api.Pod
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatalf("keep was given %.60q: %v", raw, err)
		}
		return bytes.Contains(raw, []byte(`"nodeName":"node-1"`))
	})
	if err != nil || frev != rev {
		t.Fatalf("ListFiltered: rev %d, %v; List's rev %d", frev, err, rev)
	}
	if seen != len(all) {
		t.Errorf("keep saw %d objects, List lists %d", seen, len(all))
	}
	var want []api.Object
	for _, o := range all {
		if o.(*api.Pod).Spec.NodeName == "node-1" {
			want = append(want, o)
		}
	}
	if len(want) == 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("ListFiltered gave %d objects, want List's %d on node-1 (equal, in order)", len(got), len(want))
	}
}
