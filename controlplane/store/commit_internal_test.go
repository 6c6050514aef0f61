package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"

	"skiff.dev/skiff/api"
)

// Pods whose names are written in order, by several writers at once as a
// class or a benchmark writes them, leave the store's leaves more than
// half full (fillPercent): at bbolt's default the first half of each split
// leaf stayed as the split left it, 42 % of the leaves' bytes in use.
func TestCommitFillsSplitLeaves(t *testing.T) {
	s := openRecentTest(t)
	var base api.Pod
	if err := json.Unmarshal(benchPodJSON, &base); err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 250
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Go(func() {
			for j := range each {
				p := api.Clone(&base)
				p.Namespace, p.Name, p.ResourceVersion, p.UID = "default", fmt.Sprintf("p-%d-%d", w, j), "", ""
				if _, err := s.Create(ctx, p); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		st := tx.Bucket([]byte(podKindForRecent.GroupResource())).Stats()
		if st.KeyN != writers*each {
			t.Fatalf("%d pods stored, want %d", st.KeyN, writers*each)
		}
		inUse := float64(st.LeafInuse) / float64(st.LeafAlloc)
		t.Logf("%d leaves, %.0f %% of their bytes in use", st.LeafPageN, 100*inUse)
		if inUse < 0.55 {
			t.Errorf("%.0f %% of the leaves' bytes in use, want at least 55 %% (fillPercent %.1f)", 100*inUse, fillPercent)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
