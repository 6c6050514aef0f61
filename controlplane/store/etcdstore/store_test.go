package etcdstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"skiff.dev/skiff/controlplane/etcd/etcdtest"
	"skiff.dev/skiff/controlplane/store"
	"skiff.dev/skiff/controlplane/store/etcdstore"
	"skiff.dev/skiff/controlplane/store/storetest"
)

// harness runs the shared suite on one embedded etcd member; each store
// gets a prefix of its own. The suite's cases run one after another, so
// the revisions a case sees are its own writes'.
func harness(cli *clientv3.Client) storetest.Harness {
	var n atomic.Int64
	open := func(tb testing.TB, prefix string) store.Store {
		tb.Helper()
		opts := etcdstore.DefaultOptions()
		opts.Prefix = prefix
		s, err := etcdstore.New(context.Background(), cli, opts)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = s.Close() })
		return s
	}
	prefixes := map[store.Store]string{}
	return storetest.Harness{
		Open: func(tb testing.TB) store.Store {
			p := fmt.Sprintf("/skiff-test/%d/", n.Add(1))
			s := open(tb, p)
			prefixes[s] = p
			return s
		},
		Reopen: func(tb testing.TB, s store.Store) store.Store {
			if err := s.Close(); err != nil {
				tb.Fatal(err)
			}
			return open(tb, prefixes[s])
		},
		Compact: func(tb testing.TB, _ store.Store, rev int64) {
			if _, err := cli.Compact(context.Background(), rev, clientv3.WithCompactPhysical()); err != nil {
				tb.Fatal(err)
			}
		},
		// Revoking a lease is what etcd does when it expires.
		ExpireEvents: func(tb testing.TB, _ store.Store) {
			ctx := context.Background()
			leases, err := cli.Leases(ctx)
			if err != nil {
				tb.Fatal(err)
			}
			if len(leases.Leases) == 0 {
				tb.Fatal("no leases: the Events were written without one")
			}
			for _, l := range leases.Leases {
				if _, err := cli.Revoke(ctx, l.ID); err != nil {
					tb.Fatal(err)
				}
			}
		},
		MultiVersion: true,
	}
}

func TestSuite(t *testing.T) {
	srv := etcdtest.Start(t, "suite")
	storetest.Run(t, harness(srv.Client()))
}
