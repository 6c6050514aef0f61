package store_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"skiff.dev/skiff/controlplane/store"
	"skiff.dev/skiff/controlplane/store/storetest"
)

// openStore opens a store in a temporary directory, closed by t.Cleanup.
// It returns the store and its path (to reopen it).
func openStore(tb testing.TB, opts store.Options) (*store.Bolt, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "skiff.db")
	return reopen(tb, path, opts), path
}

func reopen(tb testing.TB, path string, opts store.Options) *store.Bolt {
	tb.Helper()
	s, err := store.Open(path, opts)
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// testOptions are the defaults without fsync: the tests check logic, not
// durability (the benchmarks fsync).
func testOptions() store.Options {
	o := store.DefaultOptions()
	o.NoSync = true
	return o
}

// boltHarness runs the shared suite on bbolt stores; it remembers each
// store's path for Reopen.
func boltHarness() storetest.Harness {
	var (
		mu    sync.Mutex
		paths = map[store.Store]string{}
	)
	open := func(tb testing.TB, path string) store.Store {
		s := reopen(tb, path, testOptions())
		mu.Lock()
		paths[s] = path
		mu.Unlock()
		return s
	}
	return storetest.Harness{
		Open: func(tb testing.TB) store.Store {
			return open(tb, filepath.Join(tb.TempDir(), "skiff.db"))
		},
		Reopen: func(tb testing.TB, s store.Store) store.Store {
			mu.Lock()
			path := paths[s]
			mu.Unlock()
			if err := s.Close(); err != nil {
				tb.Fatal(err)
			}
			return open(tb, path)
		},
		Compact: func(_ testing.TB, s store.Store, rev int64) { store.CompactHistory(s.(*store.Bolt), rev) },
		ExpireEvents: func(tb testing.TB, s store.Store) {
			// A cutoff past every Event's last time: all of them have lived
			// longer than the TTL.
			if _, err := store.ExpireEventsBefore(context.Background(), s.(*store.Bolt), time.Now().Add(time.Hour)); err != nil {
				tb.Fatal(err)
			}
		},
	}
}

func TestSuite(t *testing.T) { storetest.Run(t, boltHarness()) }
