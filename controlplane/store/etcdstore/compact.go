package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// CompactKey is the key through which every server on one etcd takes turns
// compacting it. It is kube-apiserver's ("compact_rev_key", outside any
// prefix: compaction is of the whole etcd, not of one prefix), so a
// kube-apiserver sharing the etcd takes turns with skiff's servers too.
const CompactKey = "compact_rev_key"

// compactor compacts etcd every interval until the store closes, as
// kube-apiserver's storage/etcd3 compactor does: each round compacts to the
// revision the previous round recorded, so whatever changed within the
// last interval stays in history for watches and ListExact to resume from.
func (s *Store) compactor(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var version, rev int64
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		next, nextRev, compacted, err := compact(s.ctx, s.cli, version, rev)
		switch {
		case err != nil && s.ctx.Err() == nil:
			s.log.Warn("compact etcd", "revision", rev, "err", err)
		case compacted:
			s.log.Debug("compacted etcd", "revision", rev)
		}
		version, rev = next, nextRev
	}
}

// compact is one round of the compactor. version is the version of
// CompactKey this server last saw (0 at first) and rev the revision it
// recorded then. The round writes the current revision into CompactKey if
// the key is still at version (no other server's round came in between):
// then this server compacts to rev, the revision recorded one round ago.
// Otherwise another server took this round: this one only learns the
// key's version and the current revision, for its next round. So within
// one interval one server compacts, whichever comes first, and never to a
// revision younger than one interval.
//
// It returns the version and revision to pass to the next round, and
// whether it compacted. The first round of a fresh etcd (rev 0) records
// without compacting. A rev another compactor already passed (etcd's
// --auto-compaction, an operator) is not an error.
func compact(ctx context.Context, cli *clientv3.Client, version, rev int64) (int64, int64, bool, error) {
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Version(CompactKey), "=", version)).
		Then(clientv3.OpPut(CompactKey, strconv.FormatInt(rev, 10))). // increments the key's version
		Else(clientv3.OpGet(CompactKey)).
		Commit()
	if err != nil {
		return version, rev, false, fmt.Errorf("record the revision to compact: %w", err)
	}
	cur := resp.Header.Revision
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			return 0, cur, false, nil // deleted meanwhile: start again
		}
		return kvs[0].Version, cur, false, nil
	}
	if rev == 0 {
		return version + 1, cur, false, nil
	}
	if _, err := cli.Compact(ctx, rev); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return version + 1, cur, false, fmt.Errorf("compact to revision %d: %w", rev, err)
	}
	return version + 1, cur, true, nil
}
