package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	etcdsnapshot "go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/controlplane/apiserver"
	"skiff.dev/skiff/controlplane/etcd"
	"skiff.dev/skiff/controlplane/store"
	"skiff.dev/skiff/controlplane/store/etcdstore"
)

// snapshotCmd saves, checks and restores copies of the cluster's store,
// and moves a one-machine cluster's objects onto etcd. A snapshot is the
// store's own file format, so each store restores its own kind: the bbolt
// file of a one-machine server (state.db), or an etcd snapshot of a server
// on etcd (the file `etcdctl snapshot save` writes).
type snapshotCmd struct {
	r *Root

	dataDir string // restore, migrate: the server's --data-dir

	// The server's etcd member (restore of an etcd snapshot, migrate):
	// its name and URLs, as `skiff server` takes them.
	name, peerListen, clientListen string

	from          string // migrate: the bbolt store to read
	etcdEndpoints string // migrate: an external etcd instead
}

func newSnapshotCmd(r *Root) *cobra.Command { return (&snapshotCmd{r: r}).command() }

func (sc *snapshotCmd) command() *cobra.Command {
	home, _ := os.UserHomeDir()
	defDataDir := filepath.Join(home, ".skiff", "data")
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Save, check and restore snapshots of the cluster's store; move a cluster onto etcd",
		Long: `A snapshot is a consistent copy of every object of the cluster, taken while
the server runs:

  skiff snapshot save backup.db           # from the running server (the CLI config's)
  skiff snapshot status backup.db         # what it holds
  skiff snapshot restore backup.db        # into --data-dir, with the server stopped

A server on bbolt gives the bbolt file itself; a server on etcd gives an etcd
snapshot. docs/stores.md says which store to choose and what survives what.`,
	}
	save := &cobra.Command{
		Use:   "save FILE",
		Short: "Save a consistent copy of the running server's store to FILE (a new file)",
		Args:  cobra.ExactArgs(1),
		RunE:  func(cmd *cobra.Command, args []string) error { return sc.Save(cmd.Context(), args[0]) },
	}
	status := &cobra.Command{
		Use:   "status FILE",
		Short: "Check a snapshot and print its kind, revision and objects",
		Args:  cobra.ExactArgs(1),
		RunE:  func(cmd *cobra.Command, args []string) error { return sc.Status(args[0]) },
	}
	restore := &cobra.Command{
		Use:   "restore FILE",
		Short: "Restore a snapshot into a server's data directory (the server stopped)",
		Long: `Restore a snapshot into --data-dir. The server must be stopped: a running one
holds its store and the restore refuses to start.

A bbolt snapshot replaces DIR/state.db; the old one stays as
DIR/state.db.bak-TIMESTAMP. Then start the server as before.

An etcd snapshot becomes a new one-member etcd data directory in DIR/etcd
(which must not exist): then start the server with --cluster-init, and join
the other servers to it afresh.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return sc.Restore(args[0]) },
	}
	def := controlplane.DefaultEtcdConfig()
	restore.Flags().StringVar(&sc.dataDir, "data-dir", defDataDir, "the server's data directory")
	restore.Flags().StringVar(&sc.name, "name", "", "etcd snapshots: the server's name, as it will run (default: the hostname; skiff-server-HOSTNAME for a server with --no-agent)")
	restore.Flags().StringVar(&sc.peerListen, "etcd-peer-listen", def.PeerListen, "etcd snapshots: the server's --etcd-peer-listen, as it will run")
	migrate := &cobra.Command{
		Use:   "migrate --from STATE.DB (--data-dir DIR | --etcd-endpoints URLS)",
		Short: "Copy every object of a bbolt store into a new etcd store (the server stopped)",
		Long: `Copy every object of a bbolt store (a stopped server's DIR/state.db, or a
snapshot of one) into etcd: a new embedded etcd member in DIR/etcd, which the
server then runs with --cluster-init, or an external etcd (--etcd-endpoints)
that holds no object yet. Uids, labels, owner references, specs and statuses
stay; the source is not changed.

  skiff snapshot migrate --from ~/.skiff/data/state.db --data-dir ~/.skiff/data
  skiff server --cluster-init --data-dir ~/.skiff/data ...`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return sc.Migrate(cmd.Context()) },
	}
	migrate.Flags().StringVar(&sc.from, "from", "", "the bbolt store to copy")
	migrate.Flags().StringVar(&sc.dataDir, "data-dir", "", "the data directory of the server to run on embedded etcd (its member goes in DIR/etcd)")
	migrate.Flags().StringVar(&sc.etcdEndpoints, "etcd-endpoints", "", "comma list of the client URLs of an external etcd, instead of --data-dir")
	migrate.Flags().StringVar(&sc.name, "name", "", "with --data-dir: the server's name, as it will run (default: the hostname; skiff-server-HOSTNAME for a server with --no-agent)")
	migrate.Flags().StringVar(&sc.peerListen, "etcd-peer-listen", def.PeerListen, "with --data-dir: the server's --etcd-peer-listen, as it will run")
	migrate.Flags().StringVar(&sc.clientListen, "etcd-client-listen", def.ClientListen, "with --data-dir: the server's --etcd-client-listen, as it will run")
	_ = migrate.MarkFlagRequired("from")
	migrate.MarkFlagsOneRequired("data-dir", "etcd-endpoints")
	migrate.MarkFlagsMutuallyExclusive("data-dir", "etcd-endpoints")
	cmd.AddCommand(save, status, restore, migrate)
	return cmd
}

// Save streams the server's snapshot into a temporary file beside FILE,
// checks it (the server's status trailer, then the file itself) and only
// then names it FILE. An existing FILE is never overwritten.
func (sc *snapshotCmd) Save(ctx context.Context, file string) error {
	if _, err := os.Lstat(file); err == nil {
		return fmt.Errorf("snapshot save: %s exists; remove it or choose another name", file)
	}
	cfg, err := sc.r.ClientConfig()
	if err != nil {
		return err
	}
	c, err := client.New(cfg)
	if err != nil {
		return err
	}
	resp, err := c.Do(ctx, http.MethodGet, apiserver.SnapshotPath, nil)
	if err != nil {
		return fmt.Errorf("snapshot save: %w", err)
	}
	defer resp.Body.Close()
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".part-*")
	if err != nil {
		return fmt.Errorf("snapshot save: %w", err)
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name()) // FILE is a second link to it, or nothing was saved
	}()
	n, err := io.Copy(tmp, resp.Body)
	if err != nil {
		return fmt.Errorf("snapshot save: receive: %w (after %d bytes)", err, n)
	}
	if st := resp.Trailer.Get(apiserver.SnapshotStatusTrailer); st != "ok" {
		if st == "" {
			st = "the server did not finish it"
		}
		return fmt.Errorf("snapshot save: the copy is incomplete: %s", st)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("snapshot save: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("snapshot save: %w", err)
	}
	snap, err := inspectSnapshot(tmp.Name())
	if err != nil {
		return fmt.Errorf("snapshot save: the received copy does not check: %w", err)
	}
	if err := os.Link(tmp.Name(), file); err != nil { // fails when FILE appeared meanwhile
		return fmt.Errorf("snapshot save: %w", err)
	}
	fmt.Fprintf(sc.r.Stdout, "Snapshot saved to %s: %s\n", file, snap)
	return nil
}

// Status prints what a snapshot holds.
func (sc *snapshotCmd) Status(file string) error {
	snap, err := inspectSnapshot(file)
	if err != nil {
		return err
	}
	fmt.Fprintf(sc.r.Stdout, "%s: %s\n", file, snap)
	for _, c := range snap.bolt.Objects {
		fmt.Fprintf(sc.r.Stdout, "  %-34s %d\n", c.Kind.GroupResource(), c.Count)
	}
	return nil
}

// Restore puts a snapshot in place for a stopped server.
func (sc *snapshotCmd) Restore(file string) error {
	snap, err := inspectSnapshot(file)
	if err != nil {
		return fmt.Errorf("snapshot restore: %w", err)
	}
	if snap.etcd == nil {
		res, err := store.RestoreBolt(file, sc.dataDir, sc.r.Now())
		if err != nil {
			return fmt.Errorf("snapshot restore: %w", err)
		}
		fmt.Fprintf(sc.r.Stdout, "Restored %s into %s: %s\n", file, res.Path, snap)
		if res.Backup != "" {
			fmt.Fprintf(sc.r.Stdout, "The previous store is kept as %s.\n", res.Backup)
		}
		fmt.Fprintf(sc.r.Stdout, "Start the server as before (skiff server --data-dir %s ...).\n", sc.dataDir)
		return nil
	}
	return sc.restoreEtcd(file, snap)
}

// memberName is --name, or the name `skiff server` gives its member.
func (sc *snapshotCmd) memberName() string {
	if sc.name != "" {
		return sc.name
	}
	return (&clusterFlags{}).baseName()
}

// etcdClusterToken is the initial cluster token of skiff's embedded
// members (controlplane/etcd sets it).
const etcdClusterToken = "skiff"

// restoreEtcd makes a new one-member etcd data directory from an etcd
// snapshot (etcdutl's restore: the keys, a fresh cluster membership).
func (sc *snapshotCmd) restoreEtcd(file string, snap snapshotInfo) error {
	out, err := sc.newMemberDir()
	if err != nil {
		return fmt.Errorf("snapshot restore: %w", err)
	}
	name := sc.memberName()
	err = etcdsnapshot.NewV3(zap.NewNop()).Restore(etcdsnapshot.RestoreConfig{
		SnapshotPath:        file,
		Name:                name,
		OutputDataDir:       out,
		PeerURLs:            []string{sc.peerListen},
		InitialCluster:      name + "=" + sc.peerListen,
		InitialClusterToken: etcdClusterToken,
	})
	if err != nil {
		os.RemoveAll(out) // nothing half-restored stays behind
		return fmt.Errorf("snapshot restore: etcd: %w", err)
	}
	fmt.Fprintf(sc.r.Stdout, "Restored %s into %s (member %s, peer URL %s): %s\n", file, out, name, sc.peerListen, snap)
	fmt.Fprintf(sc.r.Stdout, "Start the server on it with:\n  skiff server --cluster-init --data-dir %s --etcd-peer-listen %s ...\nthen join the other servers to it afresh (empty data directories).\n", sc.dataDir, sc.peerListen)
	return nil
}

// newMemberDir is DIR/etcd, which must not exist yet: an etcd member's
// data is never overwritten (it may be the only copy of the cluster).
func (sc *snapshotCmd) newMemberDir() (string, error) {
	out := filepath.Join(sc.dataDir, "etcd")
	if _, err := os.Stat(out); err == nil {
		return "", fmt.Errorf("%s exists: a new etcd member needs a new directory; stop the server and move it away first (it may hold the only copy of the cluster)", out)
	}
	if err := os.MkdirAll(sc.dataDir, 0o700); err != nil {
		return "", err
	}
	return out, nil
}

// Migrate copies a bbolt store into etcd: a new embedded member in
// DIR/etcd (started here, stopped at the end) or an external etcd.
func (sc *snapshotCmd) Migrate(ctx context.Context) error {
	src, err := openBoltForCopy(sc.from)
	if err != nil {
		return fmt.Errorf("snapshot migrate: %w", err)
	}
	defer src.Close()
	var cli *clientv3.Client
	where := sc.etcdEndpoints
	if sc.etcdEndpoints != "" {
		cli, err = clientv3.New(clientv3.Config{Endpoints: strings.Split(sc.etcdEndpoints, ","), DialTimeout: 5 * time.Second})
		if err != nil {
			return fmt.Errorf("snapshot migrate: connect to etcd %s: %w", sc.etcdEndpoints, err)
		}
		defer cli.Close()
	} else {
		dir, err := sc.newMemberDir()
		if err != nil {
			return fmt.Errorf("snapshot migrate: %w", err)
		}
		m, err := etcd.StartEmbedded(ctx, etcd.Config{Name: sc.memberName(), DataDir: dir, PeerURL: sc.peerListen, ClientURL: sc.clientListen, Log: sc.r.Logger()})
		if err != nil {
			os.RemoveAll(dir)
			return fmt.Errorf("snapshot migrate: %w", err)
		}
		defer m.Stop()
		cli, where = m.Client(), dir
	}
	dst, err := etcdstore.New(ctx, cli, etcdstore.Options{Logger: sc.r.Logger()})
	if err != nil {
		return fmt.Errorf("snapshot migrate: open the etcd store: %w", err)
	}
	defer dst.Close()
	copied, err := store.Copy(ctx, dst, src)
	if err != nil {
		return fmt.Errorf("snapshot migrate into %s: %w", where, err)
	}
	n := 0
	for _, c := range copied {
		fmt.Fprintf(sc.r.Stdout, "  %-34s %d\n", c.Kind.GroupResource(), c.Count)
		n += c.Count
	}
	fmt.Fprintf(sc.r.Stdout, "Copied %d objects from %s into etcd (%s); %s is unchanged.\n", n, sc.from, where, sc.from)
	if sc.etcdEndpoints != "" {
		fmt.Fprintf(sc.r.Stdout, "Start the server with:\n  skiff server --etcd-endpoints %s ...\n", sc.etcdEndpoints)
	} else {
		fmt.Fprintf(sc.r.Stdout, "Start the server with:\n  skiff server --cluster-init --data-dir %s --etcd-peer-listen %s --etcd-client-listen %s ...\n", sc.dataDir, sc.peerListen, sc.clientListen)
	}
	return nil
}

// openBoltForCopy checks a bbolt store and opens it to read.
func openBoltForCopy(path string) (*store.Bolt, error) {
	if _, err := store.Inspect(path); err != nil {
		return nil, err
	}
	opts := store.DefaultOptions()
	opts.EventTTL = 100 * 365 * 24 * time.Hour // copy Events as they are; the destination expires them
	return store.Open(path, opts)
}

// snapshotInfo is a checked snapshot: a skiff bbolt store or an etcd
// snapshot.
type snapshotInfo struct {
	bolt store.Info
	etcd *etcdsnapshot.Status
}

func (s snapshotInfo) String() string {
	if s.etcd != nil {
		return fmt.Sprintf("etcd snapshot (storage %s), revision %d, %d keys, %d bytes", s.etcd.Version, s.etcd.Revision, s.etcd.TotalKey, s.etcd.TotalSize)
	}
	var kinds []string
	for _, c := range s.bolt.Objects {
		kinds = append(kinds, fmt.Sprintf("%d %s", c.Count, c.Kind.GroupResource()))
	}
	return fmt.Sprintf("skiff bbolt store, revision %d, %d objects (%s), %d bytes", s.bolt.Revision, s.bolt.Total(), strings.Join(kinds, ", "), s.bolt.Size)
}

// inspectSnapshot tells a skiff bbolt store from an etcd snapshot and
// checks it: the store through store.Inspect, the etcd snapshot by its
// sha256 trailer and etcd's own status check.
func inspectSnapshot(path string) (snapshotInfo, error) {
	info, err := store.Inspect(path)
	switch {
	case err == nil:
		return snapshotInfo{bolt: info}, nil
	case errors.Is(err, store.ErrDamaged):
		return snapshotInfo{}, fmt.Errorf("%s is no whole snapshot: %w", path, err)
	case !errors.Is(err, store.ErrNotStore):
		return snapshotInfo{}, err
	}
	st, eerr := inspectEtcd(path)
	if eerr == nil {
		return snapshotInfo{etcd: &st}, nil
	}
	return snapshotInfo{}, fmt.Errorf("%s is neither a skiff store nor an etcd snapshot: as a store: %w; as an etcd snapshot: %w", path, err, eerr)
}

// inspectEtcd checks an etcd snapshot: the sha256 trailer etcd appends
// must match, and etcd's status check (bbolt pages, revision keys) pass.
func inspectEtcd(path string) (st etcdsnapshot.Status, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return st, err
	}
	if n, err := store.CheckTrailer(path, fi.Size()); err != nil {
		return st, err
	} else if n == fi.Size() {
		return st, errors.New("no sha256 trailer (etcd snapshots end with one)")
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("damaged file: %v", p)
		}
	}()
	st, err = etcdsnapshot.NewV3(zap.NewNop()).Status(path)
	if err != nil {
		return st, err
	}
	if st.Version == "" {
		return st, errors.New("no etcd storage version in its meta bucket")
	}
	return st, nil
}
