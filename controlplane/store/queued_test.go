package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/store"
)

// A create made to depend on a queued update (store.Chainer, as quota
// admission's charge and the create it admits) is stored only when the
// update was made; after a failed update it writes nothing and says why.
func TestCreateAfterQueuedUpdate(t *testing.T) {
	s, _ := openStore(t, testOptions())
	ctx := context.Background()
	cmKind := api.MustKindOf(&api.ConfigMap{})
	cm := func(name, v string) *api.ConfigMap {
		return &api.ConfigMap{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default"}, Data: map[string]string{"v": v}}
	}
	out, err := s.Create(ctx, cm("charge", "0"))
	if err != nil {
		t.Fatal(err)
	}
	stale := out.GetObjectMeta().ResourceVersion
	cur := out.(*api.ConfigMap)
	for i := range 40 {
		// A charge that loses its race (a stale resourceVersion), then one
		// made, each followed at once by the create that depends on it:
		// mostly in one batch, sometimes in the next.
		lost := cm("charge", "lost")
		lost.ResourceVersion = stale
		if i > 0 {
			q, err := s.UpdateQueued(ctx, lost)
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("lost-%d", i)
			_, _, err = s.CreateEncodedAfter(ctx, cm(name, "x"), []*store.Queued{q}, false)
			if !errors.Is(err, store.ErrDependencyFailed) || !api.IsConflict(err) {
				t.Fatalf("create after a lost update: %v, want ErrDependencyFailed wrapping the conflict", err)
			}
			if _, err := s.Get(ctx, cmKind, "default", name); !api.IsNotFound(err) {
				t.Fatalf("create after a lost update was stored: %v", err)
			}
			if _, err := q.Wait(); !api.IsConflict(err) {
				t.Fatalf("lost update's Wait: %v, want a conflict", err)
			}
		}
		next := api.Clone(cur)
		next.Data["v"] = fmt.Sprint(i + 1)
		q, err := s.UpdateQueued(ctx, next)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("made-%d", i)
		created, raw, err := s.CreateEncodedAfter(ctx, cm(name, "y"), []*store.Queued{q, store.Done(nil, nil)}, false)
		if err != nil {
			t.Fatalf("create after an update made: %v", err)
		}
		upd, err := q.Wait()
		if err != nil {
			t.Fatalf("update: %v", err)
		}
		cur = upd.(*api.ConfigMap)
		if cur.Data["v"] != fmt.Sprint(i+1) {
			t.Fatalf("update wrote %q, want %d", cur.Data["v"], i+1)
		}
		urv, crv := cur.ResourceVersion, created.GetObjectMeta().ResourceVersion
		if len(urv) > len(crv) || len(urv) == len(crv) && urv >= crv {
			t.Fatalf("create at revision %s, not after its dependency's %s", crv, urv)
		}
		if len(raw) == 0 {
			t.Fatal("CreateEncodedAfter handed back no JSON")
		}
		if _, err := s.Get(ctx, cmKind, "default", name); err != nil {
			t.Fatalf("create after an update made is not stored: %v", err)
		}
	}
	// A dependency already known to have failed (store.Done) fails the
	// create before it is queued.
	_, _, err = s.CreateEncodedAfter(ctx, cm("never", "z"), []*store.Queued{store.Done(nil, errors.New("disk full"))}, false)
	if !errors.Is(err, store.ErrDependencyFailed) {
		t.Fatalf("create after a failed Done: %v", err)
	}
	if _, err := s.Get(ctx, cmKind, "default", "never"); !api.IsNotFound(err) {
		t.Fatalf("create after a failed Done was stored: %v", err)
	}
	if err := store.WaitAll([]*store.Queued{store.Done(nil, nil), store.Done(nil, errors.New("boom"))}); !errors.Is(err, store.ErrDependencyFailed) {
		t.Fatalf("WaitAll with a failure: %v", err)
	}
}
