package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"skiff.dev/skiff/api"
)

func TestCreateGetUpdateDelete(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t, testOptions())

	created := mustCreate(t, s, newPod("default", "web")).(*api.Pod)
	m := created.ObjectMeta
	if m.ResourceVersion != "1" || m.UID == "" || m.CreationTimestamp.IsZero() {
		t.Fatalf("created meta = %+v, want resourceVersion 1, uid and creationTimestamp set", m)
	}
	if created.APIVersion != "v1" || created.Kind != "Pod" {
		t.Fatalf("type meta = %+v", created.TypeMeta)
	}
	if len(m.UID) != 36 || m.UID[14] != '4' {
		t.Fatalf("uid %q is not a v4 uuid", m.UID)
	}

	got, err := s.Get(ctx, podKind, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	if g := got.(*api.Pod); g.UID != m.UID || g.ResourceVersion != "1" || g.Spec.Containers[0].Image != "nginx:1.27" {
		t.Fatalf("get = %+v", g)
	}

	upd := got.(*api.Pod)
	upd.Spec.Containers[0].Image = "nginx:1.28"
	upd.UID, upd.CreationTimestamp = "", api.Time{} // kept from the stored object
	out, err := s.Update(ctx, upd)
	if err != nil {
		t.Fatal(err)
	}
	if o := out.(*api.Pod); o.ResourceVersion != "2" || o.UID != m.UID || !o.CreationTimestamp.Equal(m.CreationTimestamp.Time) {
		t.Fatalf("updated meta = %+v", o.ObjectMeta)
	}

	// Update without resourceVersion: unconditional.
	upd.ResourceVersion = ""
	if out, err = s.Update(ctx, upd); err != nil || rvOf(out) != "3" {
		t.Fatalf("unconditional update: %v, rv %v", err, out)
	}

	del, err := s.Delete(ctx, podKind, "default", "web", nil)
	if err != nil {
		t.Fatal(err)
	}
	if rvOf(del) != "4" || del.(*api.Pod).Spec.Containers[0].Image != "nginx:1.28" {
		t.Fatalf("deleted = %+v, want last state with resourceVersion 4", del)
	}
	if _, err := s.Get(ctx, podKind, "default", "web"); !api.IsNotFound(err) {
		t.Fatalf("get after delete: %v, want NotFound", err)
	}
	if s.Revision() != 4 {
		t.Fatalf("revision = %d, want 4", s.Revision())
	}
}

func TestWriteErrors(t *testing.T) {
	ptr := func(s string) *string { return &s }
	tests := []struct {
		name string
		// do runs against a store holding default/web at resourceVersion 1.
		do   func(ctx context.Context, s *Bolt, web *api.Pod) error
		want func(error) bool
	}{
		{"create existing", func(ctx context.Context, s *Bolt, _ *api.Pod) error {
			_, err := s.Create(ctx, newPod("default", "web"))
			return err
		}, api.IsAlreadyExists},
		{"get missing", func(ctx context.Context, s *Bolt, _ *api.Pod) error {
			_, err := s.Get(ctx, podKind, "default", "nope")
			return err
		}, api.IsNotFound},
		{"get other namespace", func(ctx context.Context, s *Bolt, _ *api.Pod) error {
			_, err := s.Get(ctx, podKind, "other", "web")
			return err
		}, api.IsNotFound},
		{"update missing", func(ctx context.Context, s *Bolt, _ *api.Pod) error {
			_, err := s.Update(ctx, newPod("default", "nope"))
			return err
		}, api.IsNotFound},
		{"update stale resourceVersion", func(ctx context.Context, s *Bolt, web *api.Pod) error {
			web.ResourceVersion = "7"
			_, err := s.Update(ctx, web)
			return err
		}, api.IsConflict},
		{"update other uid", func(ctx context.Context, s *Bolt, web *api.Pod) error {
			web.UID = "not-the-uid"
			_, err := s.Update(ctx, web)
			return err
		}, api.IsConflict},
		{"update invalid resourceVersion", func(ctx context.Context, s *Bolt, web *api.Pod) error {
			web.ResourceVersion = "abc"
			_, err := s.Update(ctx, web)
			return err
		}, func(err error) bool { return api.ReasonOf(err) == api.ReasonBadRequest }},
		{"delete missing", func(ctx context.Context, s *Bolt, _ *api.Pod) error {
			_, err := s.Delete(ctx, podKind, "default", "nope", nil)
			return err
		}, api.IsNotFound},
		{"delete stale resourceVersion precondition", func(ctx context.Context, s *Bolt, _ *api.Pod) error {
			_, err := s.Delete(ctx, podKind, "default", "web", &api.Preconditions{ResourceVersion: ptr("9")})
			return err
		}, api.IsConflict},
		{"delete other uid precondition", func(ctx context.Context, s *Bolt, _ *api.Pod) error {
			_, err := s.Delete(ctx, podKind, "default", "web", &api.Preconditions{UID: ptr("x")})
			return err
		}, api.IsConflict},
		{"create without name", func(ctx context.Context, s *Bolt, _ *api.Pod) error {
			_, err := s.Create(ctx, newPod("default", ""))
			return err
		}, func(err error) bool { return api.ReasonOf(err) == api.ReasonBadRequest }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			s, _ := openStore(t, testOptions())
			web := mustCreate(t, s, newPod("default", "web")).(*api.Pod)
			err := tt.do(ctx, s, api.Clone(web))
			if !tt.want(err) {
				t.Fatalf("err = %v (reason %q)", err, api.ReasonOf(err))
			}
			var se *api.StatusError
			if !errors.As(err, &se) {
				t.Fatalf("err %T is not a *api.StatusError", err)
			}
			// The store is unchanged.
			if s.Revision() != 1 {
				t.Fatalf("revision = %d after a failed write, want 1", s.Revision())
			}
			got, err := s.Get(ctx, podKind, "default", "web")
			if err != nil || rvOf(got) != "1" {
				t.Fatalf("web after failed write: %v, %v", got, err)
			}
		})
	}
}

func TestDeletePreconditionsHold(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t, testOptions())
	web := mustCreate(t, s, newPod("default", "web"))
	uid, rv := web.GetObjectMeta().UID, rvOf(web)
	if _, err := s.Delete(ctx, podKind, "default", "web", &api.Preconditions{UID: &uid, ResourceVersion: &rv}); err != nil {
		t.Fatalf("delete with matching preconditions: %v", err)
	}
}

func TestListNamespaces(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t, testOptions())
	for _, k := range []string{"b/web-2", "a/web-1", "a-b/x", "b/web-1", "a/web-0"} {
		ns, name, _ := strings.Cut(k, "/")
		mustCreate(t, s, newPod(ns, name))
	}
	mustCreate(t, s, &api.ConfigMap{ObjectMeta: api.ObjectMeta{Namespace: "a", Name: "cfg"}})
	mustCreate(t, s, &api.Node{ObjectMeta: api.ObjectMeta{Name: "n1"}})

	tests := []struct {
		kind      *api.Kind
		namespace string
		want      []string
	}{
		{podKind, "a", []string{"a/web-0", "a/web-1"}},
		{podKind, "b", []string{"b/web-1", "b/web-2"}},
		{podKind, "a-b", []string{"a-b/x"}},
		{podKind, "none", nil},
		{podKind, "", []string{"a-b/x", "a/web-0", "a/web-1", "b/web-1", "b/web-2"}},
		{cmKind, "", []string{"a/cfg"}},
		{nodeKind, "", []string{"n1"}},
		{evKind, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.kind.Resource+"/"+tt.namespace, func(t *testing.T) {
			objs, rev, err := s.List(ctx, tt.kind, tt.namespace)
			if err != nil {
				t.Fatal(err)
			}
			if rev != 7 {
				t.Fatalf("list revision = %d, want 7", rev)
			}
			var got []string
			for _, o := range objs {
				got = append(got, api.KeyOf(o))
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("list = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestObjectsAreCopies(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t, testOptions())
	in := newPod("default", "web")
	out := mustCreate(t, s, in).(*api.Pod)
	if in.ResourceVersion != "" || in.UID != "" {
		t.Fatal("Create changed its argument")
	}
	in.Labels["app"] = "changed-input"
	out.Labels["app"] = "changed-output"
	got, _ := s.Get(ctx, podKind, "default", "web")
	got.GetObjectMeta().Labels["app"] = "changed-get"
	again, _ := s.Get(ctx, podKind, "default", "web")
	if again.GetObjectMeta().Labels["app"] != "web" {
		t.Fatalf("stored label = %q, want web", again.GetObjectMeta().Labels["app"])
	}
}

func TestGuaranteedUpdate(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t, testOptions())
	mustCreate(t, s, newPod("default", "web"))

	t.Run("change", func(t *testing.T) {
		out, err := s.GuaranteedUpdate(ctx, podKind, "default", "web", func(cur api.Object) (api.Object, error) {
			cur.GetObjectMeta().Labels["tier"] = "front"
			return cur, nil
		})
		if err != nil || out.GetObjectMeta().Labels["tier"] != "front" || rvOf(out) != "2" {
			t.Fatalf("out %v, err %v", out, err)
		}
	})
	t.Run("no-op keeps the revision", func(t *testing.T) {
		before := s.Revision()
		out, err := s.GuaranteedUpdate(ctx, podKind, "default", "web", func(cur api.Object) (api.Object, error) {
			cur.GetObjectMeta().Labels["tier"] = "front" // already so
			return cur, nil
		})
		if err != nil || s.Revision() != before || rvOf(out) != fmt.Sprint(before) {
			t.Fatalf("no-op: err %v, revision %d -> %d, rv %s", err, before, s.Revision(), rvOf(out))
		}
	})
	t.Run("retry on conflict", func(t *testing.T) {
		calls := 0
		out, err := s.GuaranteedUpdate(ctx, podKind, "default", "web", func(cur api.Object) (api.Object, error) {
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
		if l["other"] != "yes" || l["mine"] != "yes" {
			t.Fatalf("labels = %v, want both writes", l)
		}
	})
	t.Run("error aborts", func(t *testing.T) {
		boom := errors.New("boom")
		before := s.Revision()
		_, err := s.GuaranteedUpdate(ctx, podKind, "default", "web", func(api.Object) (api.Object, error) { return nil, boom })
		if !errors.Is(err, boom) || s.Revision() != before {
			t.Fatalf("err %v, revision %d -> %d", err, before, s.Revision())
		}
	})
	t.Run("not found", func(t *testing.T) {
		_, err := s.GuaranteedUpdate(ctx, podKind, "default", "nope", func(cur api.Object) (api.Object, error) { return cur, nil })
		if !api.IsNotFound(err) {
			t.Fatalf("err %v, want NotFound", err)
		}
	})
}

func TestConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t, testOptions())
	const writers, each = 64, 10
	var (
		mu   sync.Mutex
		revs = map[string]bool{}
		wg   sync.WaitGroup
		errs = make(chan error, writers)
	)
	record := func(o api.Object) bool {
		mu.Lock()
		defer mu.Unlock()
		dup := revs[rvOf(o)]
		revs[rvOf(o)] = true
		return !dup
	}
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				p, err := s.Create(ctx, newPod(fmt.Sprintf("ns-%d", w%4), fmt.Sprintf("p-%d-%d", w, i)))
				if err != nil {
					errs <- err
					return
				}
				if !record(p) {
					errs <- fmt.Errorf("duplicate revision %s", rvOf(p))
					return
				}
				p.GetObjectMeta().Labels["n"] = "1"
				u, err := s.Update(ctx, p)
				if err != nil {
					errs <- err
					return
				}
				if !record(u) {
					errs <- fmt.Errorf("duplicate revision %s", rvOf(u))
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
	if want := int64(2 * writers * each); s.Revision() != want || len(revs) != int(want) {
		t.Fatalf("revision %d, distinct revisions %d, want %d", s.Revision(), len(revs), want)
	}
	objs, _, _ := s.List(ctx, podKind, "")
	if len(objs) != writers*each {
		t.Fatalf("listed %d pods, want %d", len(objs), writers*each)
	}
	st := s.Stats()
	t.Logf("stats: %+v", st)
	if st.Writes != uint64(2*writers*each) || st.Commits > st.Batches {
		t.Fatalf("stats = %+v", st)
	}
}

func TestConcurrentUpdatesSameVersion(t *testing.T) {
	tests := []struct {
		name  string
		delay time.Duration
	}{
		{"as they come", 0},
		// A long delay with MaxBatch = writers puts every update in one
		// batch: the conflicts are found inside the transaction.
		{"one batch", time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			const writers = 64
			s, path := openStore(t, testOptions())
			base := mustCreate(t, s, newPod("default", "web"))
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			opts := testOptions()
			opts.MaxBatch, opts.MaxBatchDelay = writers, tt.delay
			s = reopen(t, path, opts)

			var wg sync.WaitGroup
			results := make(chan error, writers)
			for i := range writers {
				wg.Go(func() {
					p := api.Clone(base)
					p.GetObjectMeta().Labels["writer"] = fmt.Sprint(i)
					_, err := s.Update(ctx, p)
					results <- err
				})
			}
			wg.Wait()
			close(results)
			wins := 0
			for err := range results {
				switch {
				case err == nil:
					wins++
				case !api.IsConflict(err):
					t.Fatalf("err = %v, want Conflict", err)
				}
			}
			if wins != 1 || s.Revision() != 2 {
				t.Fatalf("%d winners, revision %d; want 1 winner, revision 2", wins, s.Revision())
			}
			if tt.delay > 0 {
				if n := s.Stats().Batches; n != 1 {
					t.Fatalf("%d batches, want 1", n)
				}
			}
		})
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
			_, errs[i] = s.Create(ctx, newPod("default", name))
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
	st := s.Stats()
	if failed != 1 || st.Batches != 1 || st.Commits != 1 || st.Writes != 2 || st.FailedWrites != 1 || s.Revision() != 2 {
		t.Fatalf("failed %d, stats %+v; want one failure in one committed batch of two writes", failed, st)
	}
}

func TestPersistence(t *testing.T) {
	ctx := context.Background()
	s, path := openStore(t, testOptions())
	web := mustCreate(t, s, newPod("default", "web"))
	mustCreate(t, s, newPod("default", "gone"))
	mustCreate(t, s, &api.Node{ObjectMeta: api.ObjectMeta{Name: "n1"}})
	if _, err := s.Delete(ctx, podKind, "default", "gone", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = reopen(t, path, testOptions())
	if s.Revision() != 4 {
		t.Fatalf("revision after reopen = %d, want 4", s.Revision())
	}
	got, err := s.Get(ctx, podKind, "default", "web")
	if err != nil || got.GetObjectMeta().UID != web.GetObjectMeta().UID || rvOf(got) != "1" {
		t.Fatalf("web after reopen: %v, %v", got, err)
	}
	if _, err := s.Get(ctx, podKind, "default", "gone"); !api.IsNotFound(err) {
		t.Fatalf("deleted pod after reopen: %v", err)
	}
	if _, err := s.Get(ctx, nodeKind, "", "n1"); err != nil {
		t.Fatal(err)
	}
	if p := mustCreate(t, s, newPod("default", "new")); rvOf(p) != "5" {
		t.Fatalf("first write after reopen has resourceVersion %s, want 5", rvOf(p))
	}
}

func TestClose(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t, testOptions())
	mustCreate(t, s, newPod("default", "web"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := s.Create(ctx, newPod("default", "x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("create after close: %v, want ErrClosed", err)
	}
	if _, err := s.Get(ctx, podKind, "default", "web"); !errors.Is(err, ErrClosed) {
		t.Fatalf("get after close: %v, want ErrClosed", err)
	}
	if _, err := s.Watch(ctx, podKind, "", 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("watch after close: %v, want ErrClosed", err)
	}
}

func TestContextCanceled(t *testing.T) {
	s, _ := openStore(t, testOptions())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Get(ctx, podKind, "default", "web"); !errors.Is(err, context.Canceled) {
		t.Fatalf("get: %v, want context.Canceled", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := DefaultOptions().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	bad := Options{HistorySize: -1, WatchBuffer: -1, MaxBatch: -1, MaxBatchDelay: -1, EventTTL: -1, SweepInterval: -1}
	err := bad.Validate()
	if err == nil {
		t.Fatal("negative options accepted")
	}
	for _, field := range []string{"history size", "watch buffer", "max batch", "max batch delay", "event ttl", "sweep interval"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error %q does not name %q", err, field)
		}
	}
	if _, err := Open(t.TempDir()+"/x.db", bad); err == nil {
		t.Fatal("Open accepted invalid options")
	}
}
