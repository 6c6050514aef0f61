package etcdstore

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Snapshot writes etcd's snapshot of the member cli is connected to: the
// member's whole database (every key, skiff's and any other, at one
// revision) followed by its sha256, as `etcdctl snapshot save` writes
// it. The member streams it from one read transaction: writes go on
// meanwhile. A stream that ends without the sha256 fails.
func Snapshot(ctx context.Context, cli *clientv3.Client, w io.Writer) error {
	resp, err := cli.SnapshotWithVersion(ctx)
	if err != nil {
		return fmt.Errorf("etcd snapshot: %w", err)
	}
	defer resp.Snapshot.Close()
	n, err := io.Copy(w, resp.Snapshot)
	if err != nil {
		return fmt.Errorf("etcd snapshot: after %d bytes: %w", n, err)
	}
	if n%512 != sha256.Size {
		return fmt.Errorf("etcd snapshot: %d bytes without a sha256 at the end: cut short", n)
	}
	return nil
}

// The API server's Snapshotter (controlplane/apiserver/snapshot.go).
var _ interface {
	Snapshot(context.Context, io.Writer) error
} = (*Store)(nil)

// Snapshot writes the etcd snapshot of the member the store's client is
// connected to (see the function Snapshot): what `skiff snapshot save`
// gets from a server on etcd. It implements apiserver.Snapshotter.
func (s *Store) Snapshot(ctx context.Context, w io.Writer) error {
	return Snapshot(ctx, s.cli, w)
}
