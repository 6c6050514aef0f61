package apiserver

import (
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/clienttest"
	"skiff.dev/skiff/controlplane/store"
)

// localHistory is the watch history of the suite's stores: small, so that
// ExpireHistory needs few writes.
const localHistory = 32

// TestLocalSuite runs the client.Interface suite against Local over a real
// bbolt store, the same suite client/fake passes.
func TestLocalSuite(t *testing.T) {
	clienttest.Run(t, clienttest.Target{
		New: func(t testing.TB) client.Interface {
			st := defaultsStore(t, store.Options{NoSync: true, HistorySize: localHistory})
			reg := NewRegistry(st, nil)
			if err := reg.EnsureDefaults(t.Context()); err != nil {
				t.Fatal(err)
			}
			return NewLocal(reg)
		},
		ExpireHistory: func(t testing.TB, c client.Interface) {
			// Push the history past every earlier revision.
			cm := &api.ConfigMap{ObjectMeta: api.ObjectMeta{Name: "history-filler", Namespace: DefaultNamespace}}
			if _, err := c.Create(t.Context(), cm); err != nil {
				t.Fatal(err)
			}
			for i := range localHistory {
				cm.Data = map[string]string{"n": strconv.Itoa(i)}
				if _, err := c.Update(t.Context(), cm); err != nil {
					t.Fatal(err)
				}
			}
		},
		Namespaces:        true,
		ServiceAllocation: true,
	})
}

// TestLocalWatchFromTheFutureEnds: Local answers a watch from a revision the
// store has not reached as the HTTP API does: the stream ends with the 504
// "Too large resource version", so an informer relists.
func TestLocalWatchFromTheFutureEnds(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	reg := NewRegistry(st, nil)
	reg.freshWait = 10 * time.Millisecond
	l := NewLocal(reg)
	future := strconv.FormatInt(st.Revision()+1000, 10)
	w, err := l.Watch(t.Context(), cmKind, DefaultNamespace, api.ListOptions{ResourceVersion: future})
	if err != nil {
		t.Fatalf("Watch returned %v; want a watcher whose stream ends with the error", err)
	}
	defer w.Stop()
	for range w.Events() {
		t.Fatal("an event from a watch that cannot start")
	}
	if !api.IsTooLargeResourceVersion(w.Err()) {
		t.Fatalf("Err() = %v, want Too large resource version", w.Err())
	}
}
