package etcdstore

import (
	"context"
	"errors"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"skiff.dev/skiff/controlplane/etcd/etcdtest"
)

// compactor is the state one server's compactor carries between rounds.
type compactor struct{ version, rev int64 }

// TestCompactRounds runs the rounds of two servers' compactors by hand, in
// an order a clock could give them: per round one server compacts, to the
// revision recorded one round before; the other only learns where the key
// is.
func TestCompactRounds(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.Start(t, "compact").Client() // its own etcd: compaction is global
	put := func() int64 {
		t.Helper()
		resp, err := cli.Put(ctx, "/k", "v")
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	readable := func(rev int64) bool {
		t.Helper()
		_, err := cli.Get(ctx, "/k", clientv3.WithRev(rev))
		if err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
			t.Fatal(err)
		}
		return err == nil
	}
	var a, b compactor
	steps := []struct {
		name          string
		who           *compactor
		wantCompacted bool
		wantVersion   int64 // of CompactKey after the round
	}{
		{"a's first round records the revision, compacts nothing", &a, false, 1},
		{"b's first round finds a's record: b learns, compacts nothing", &b, false, 1},
		{"a's second round compacts to what it recorded", &a, true, 2},
		{"b's second round is late: a took the round", &b, false, 2},
		{"b's third round comes first this time: b compacts", &b, true, 3},
		{"a's third round finds b's record", &a, false, 3},
	}
	for _, st := range steps {
		before := put()
		recorded := st.who.rev
		v, rev, compacted, err := compact(ctx, cli, st.who.version, st.who.rev)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		st.who.version, st.who.rev = v, rev
		if compacted != st.wantCompacted {
			t.Fatalf("%s: compacted = %v, want %v", st.name, compacted, st.wantCompacted)
		}
		if rev < before {
			t.Fatalf("%s: next revision %d older than the write at %d", st.name, rev, before)
		}
		got, err := cli.Get(ctx, CompactKey)
		if err != nil || len(got.Kvs) != 1 {
			t.Fatalf("%s: read %s: %v %v", st.name, CompactKey, got, err)
		}
		if got.Kvs[0].Version != st.wantVersion {
			t.Fatalf("%s: %s at version %d, want %d", st.name, CompactKey, got.Kvs[0].Version, st.wantVersion)
		}
		if compacted {
			if readable(recorded-1) || !readable(recorded) {
				t.Fatalf("%s: want history before %d gone and %d kept", st.name, recorded, recorded)
			}
			if !readable(before) {
				t.Fatalf("%s: the write of this interval (%d) was compacted", st.name, before)
			}
		}
	}
}
