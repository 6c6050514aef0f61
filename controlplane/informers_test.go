package controlplane

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/controlplane/store"
	"skiff.dev/skiff/internal/testwait"
)

// The leader keeps one cache and one watch stream per kind: every watch
// the control plane opens on its store is an informer of the shared
// factory, which makes one informer per kind (issue 25, "one cache per
// kind in the leader"). A component that made an informer of its own
// again (client.NewInformer) would open a second watch of that kind and
// fail this test.
func TestLeaderWatchesEachKindOnce(t *testing.T) {
	cfg := DefaultConfig(filepath.Join(t.TempDir(), "server"))
	cfg.API.Listen = "127.0.0.1:0"
	cp, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	st, ok := cp.st.(interface{ Stats() store.Stats })
	if !ok {
		t.Fatalf("store %T has no Stats", cp.st)
	}
	// The controllers, the scheduler and the queue manager all read these:
	// one informer of each, shared.
	shared := []string{"pods", "nodes", "namespaces", "jobs", "resourceclaims"}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	testwait.Until(t, 30*time.Second, func() (bool, string) {
		f := cp.LeaderInformers()
		if f == nil || !f.WaitForCacheSync(ctx) {
			return false, "not leading yet"
		}
		var kinds []string
		for _, inf := range f.Informers() {
			if !inf.HasSynced() {
				return false, inf.Kind().Resource + " not synced"
			}
			kinds = append(kinds, inf.Kind().Resource)
		}
		// A factory the leader has just made has no informers yet, and
		// its store watchers are as many: wait for the components'.
		for _, res := range shared {
			if !slices.Contains(kinds, res) {
				return false, fmt.Sprintf("no informer of %s yet (%s)", res, strings.Join(kinds, ", "))
			}
		}
		// Besides the shared informers: the API server's own RBAC cache,
		// which every server runs, leader or not.
		w, own := st.Stats().Watchers, cp.server.OwnWatches()
		return w == len(kinds)+own, fmt.Sprintf("%d store watchers, %d shared informers (%s), %d of the API server's RBAC cache", w, len(kinds), strings.Join(kinds, ", "), own)
	})
	f := cp.LeaderInformers()
	t.Logf("%d store watchers, one per shared informer and %d of the API server's RBAC cache", st.Stats().Watchers, cp.server.OwnWatches())
	for _, res := range shared {
		n := 0
		for _, inf := range f.Informers() {
			if inf.Kind().Resource == res {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d informers of %s; want 1", n, res)
		}
	}
}
