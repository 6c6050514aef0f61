package etcdstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/etcd/etcdtest"
	"skiff.dev/skiff/controlplane/store/etcdstore"
	st "skiff.dev/skiff/controlplane/store/storetest"
	"skiff.dev/skiff/internal/testwait"
)

// Tests of what only the etcd store does: its keys, its leases, two
// stores (two servers) on one etcd.

func newStore(tb testing.TB, cli *clientv3.Client, opts etcdstore.Options) *etcdstore.Store {
	tb.Helper()
	s, err := etcdstore.New(context.Background(), cli, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

func TestEtcd(t *testing.T) {
	cli := etcdtest.Start(t, "etcdstore").Client()
	t.Run("KeyLayout", func(t *testing.T) { testKeyLayout(t, cli) })
	t.Run("EventLease", func(t *testing.T) { testEventLease(t, cli) })
	t.Run("EventsExpire", func(t *testing.T) { testEventsExpire(t, cli) })
	t.Run("TwoServers", func(t *testing.T) { testTwoServers(t, cli) })
	t.Run("SlowWatcherIsClosed", func(t *testing.T) { testSlowWatcher(t, cli) })
}

func testKeyLayout(t *testing.T, cli *clientv3.Client) {
	ctx := context.Background()
	s := newStore(t, cli, etcdstore.Options{Prefix: "/layout/"})
	p := st.MustCreate(t, s, st.NewPod("default", "web"))
	st.MustCreate(t, s, &api.Node{ObjectMeta: api.ObjectMeta{Name: "n1"}})
	resp, err := cli.Get(ctx, "/layout/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
		if strings.Contains(string(kv.Value), "resourceVersion") {
			t.Errorf("%s stores its resourceVersion: %s", kv.Key, kv.Value)
		}
		if strings.HasSuffix(string(kv.Key), "/web") && fmt.Sprint(kv.ModRevision) != st.RV(p) {
			t.Errorf("pod's mod revision %d, resourceVersion %s", kv.ModRevision, st.RV(p))
		}
	}
	if want := "[/layout/nodes/n1 /layout/pods/default/web]"; fmt.Sprint(keys) != want {
		t.Fatalf("keys = %v, want %s", keys, want)
	}
}

func testEventLease(t *testing.T, cli *clientv3.Client) {
	ctx := context.Background()
	s := newStore(t, cli, etcdstore.Options{Prefix: "/lease/", EventTTL: time.Hour})
	st.MustCreate(t, s, st.NewEvent("a", time.Time{}))
	st.MustCreate(t, s, st.NewEvent("b", time.Time{}))
	st.MustCreate(t, s, st.NewPod("default", "web"))
	leaseOf := func(key string) clientv3.LeaseID {
		resp, err := cli.Get(ctx, key)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("get %s: %v", key, err)
		}
		return clientv3.LeaseID(resp.Kvs[0].Lease)
	}
	a, b := leaseOf("/lease/events/default/a"), leaseOf("/lease/events/default/b")
	if a == 0 || a != b {
		t.Fatalf("event leases %x and %x, want one shared lease", a, b)
	}
	if l := leaseOf("/lease/pods/default/web"); l != 0 {
		t.Fatalf("pod has lease %x, want none", l)
	}
	ttl, err := cli.TimeToLive(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	// Granted for 1.05 h: at least the TTL, at most 5% more.
	if ttl.GrantedTTL < 3600 || ttl.GrantedTTL > 3780 || ttl.TTL < 3600 {
		t.Fatalf("lease granted %ds, %ds left; want 3600..3780", ttl.GrantedTTL, ttl.TTL)
	}
}

func testEventsExpire(t *testing.T, cli *clientv3.Client) {
	ctx := context.Background()
	s := newStore(t, cli, etcdstore.Options{Prefix: "/expire/", EventTTL: time.Second})
	ch, err := s.Watch(ctx, st.EvKind, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	st.MustCreate(t, s, st.NewEvent("e", time.Time{}))
	st.MustCreate(t, s, st.NewPod("default", "web"))
	st.ExpectNext(t, ch, api.Added, "e")
	// etcd expires the lease on its own clock (its shortest lease is a few
	// seconds); the watcher sees the delete.
	st.ExpectNext(t, ch, api.Deleted, "e")
	testwait.For(t, 10*time.Second, "the expired event to be gone", func() bool {
		_, err := s.Get(ctx, st.EvKind, "default", "e")
		return api.IsNotFound(err)
	})
	if _, err := s.Get(ctx, st.PodKind, "default", "web"); err != nil {
		t.Fatalf("pod after expiry: %v", err)
	}
}

// Two stores on one etcd are two API servers: each sees the other's
// writes, in its watches, its revision and WaitForRevision.
func testTwoServers(t *testing.T, cli *clientv3.Client) {
	ctx := context.Background()
	a := newStore(t, cli, etcdstore.Options{Prefix: "/two/"})
	b := newStore(t, cli, etcdstore.Options{Prefix: "/two/"})
	ch, err := b.Watch(ctx, st.PodKind, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	p := st.MustCreate(t, a, st.NewPod("default", "web"))
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := b.WaitForRevision(wctx, st.Rev(t, p)); err != nil {
		t.Fatalf("b waits for a's write: %v", err)
	}
	if e := st.ExpectNext(t, ch, api.Added, "web"); e.Revision != st.Rev(t, p) {
		t.Fatalf("b's watch: revision %d, want %d", e.Revision, st.Rev(t, p))
	}
	// A write of b's on a's stale read conflicts.
	got, err := b.Get(ctx, st.PodKind, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	got.GetObjectMeta().Labels["by"] = "b"
	if _, err := b.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	p.GetObjectMeta().Labels["by"] = "a"
	if _, err := a.Update(ctx, p); !api.IsConflict(err) {
		t.Fatalf("a's update on a stale version: %v, want Conflict", err)
	}
	testwait.For(t, 10*time.Second, "a's revision to follow b's write", func() bool { return a.Revision() == b.Revision() })
}

func testSlowWatcher(t *testing.T, cli *clientv3.Client) {
	ctx := context.Background()
	s := newStore(t, cli, etcdstore.Options{Prefix: "/slow/", WatchBuffer: 4})
	slow, err := s.Watch(ctx, st.PodKind, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	const writes = 50
	for i := range writes {
		st.MustCreate(t, s, st.NewPod("default", fmt.Sprintf("p%d", i)))
	}
	// Nobody read slow: it delivers the WatchBuffer events it kept, in
	// order, then closes.
	var first, last int64
	got := 0
	for e := range slow {
		if last != 0 && e.Revision != last+1 {
			t.Fatalf("revision %d after %d: gap", e.Revision, last)
		}
		if first == 0 {
			first = e.Revision
		}
		last = e.Revision
		got++
	}
	if got != 4 {
		t.Fatalf("slow watcher got %d events before closing, want its buffer's 4 of %d", got, writes)
	}
	resumed, err := s.Watch(ctx, st.PodKind, "", last)
	if err != nil {
		t.Fatal(err)
	}
	if e := st.Next(t, resumed); e.Revision != last+1 {
		t.Fatalf("resumed at %d, want %d", e.Revision, last+1)
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := etcdstore.DefaultOptions().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	bad := etcdstore.Options{Prefix: "skiff", EventTTL: time.Millisecond, WatchBuffer: -1, CompactInterval: -time.Second}
	err := bad.Validate()
	if err == nil {
		t.Fatal("bad options accepted")
	}
	for _, field := range []string{"prefix", "event ttl", "watch buffer", "compact interval"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error %q does not name %q", err, field)
		}
	}
	if _, err := etcdstore.New(context.Background(), nil, bad); err == nil {
		t.Fatal("New accepted invalid options")
	}
}

// TestCompaction runs the store's compactor on a short interval: the
// history of old revisions goes (ListExact and Watch from them are Gone,
// as against Kubernetes), a watch that follows along is not disturbed,
// and a store without CompactInterval compacts nothing.
func TestCompaction(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.Start(t, "compaction").Client() // its own etcd: compaction is global
	off := newStore(t, cli, etcdstore.Options{Prefix: "/off/"})
	old := st.MustCreate(t, off, st.NewPod("default", "old"))
	for i := range 5 {
		st.MustCreate(t, off, st.NewPod("default", fmt.Sprintf("p%d", i)))
	}
	if _, err := off.ListExact(ctx, st.PodKind, "", st.Rev(t, old)); err != nil {
		t.Fatalf("without CompactInterval: list at %d: %v", st.Rev(t, old), err)
	}

	s := newStore(t, cli, etcdstore.Options{Prefix: "/on/", CompactInterval: 50 * time.Millisecond})
	wctx, stop := context.WithCancel(ctx)
	live, err := s.Watch(wctx, st.PodKind, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	var last int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range live {
			mu.Lock()
			if e.Revision <= last {
				t.Errorf("live watch: revision %d after %d", e.Revision, last)
			}
			last = e.Revision
			seen[e.Object.GetObjectMeta().Name] = true
			mu.Unlock()
		}
	}()
	n := 0
	testwait.Until(t, 20*time.Second, func() (bool, string) {
		n++
		st.MustCreate(t, s, st.NewPod("default", fmt.Sprintf("w%d", n))) // keep the revision moving
		_, err := s.ListExact(ctx, st.PodKind, "", st.Rev(t, old))
		return api.IsGone(err), fmt.Sprintf("list at compacted revision %d: Gone, got %v", st.Rev(t, old), err)
	})
	if _, err := s.Watch(ctx, st.PodKind, "", st.Rev(t, old)); !api.IsGone(err) || !strings.Contains(err.Error(), "too old resource version") {
		t.Fatalf("watch from compacted revision %d: %v, want Gone", st.Rev(t, old), err)
	}
	// Still serving: a write, a list, and the watch opened before the
	// compaction sees every write.
	st.MustCreate(t, s, st.NewPod("default", "after"))
	items, _, err := s.List(ctx, st.PodKind, "")
	if err != nil || len(items) != n+1 {
		t.Fatalf("list after compaction: %d items, %v; want %d", len(items), err, n+1)
	}
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == n+1, fmt.Sprintf("the live watch to see all %d creates, saw %d", n+1, len(seen))
	})
	select {
	case <-done:
		t.Fatal("the live watch closed")
	default:
	}
	stop()
	<-done
}
