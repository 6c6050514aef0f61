package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"skiff.dev/skiff/client"
	"skiff.dev/skiff/cluster"
	"skiff.dev/skiff/controlplane/store/snapshot"
)

// snapshotCmd saves, checks and restores copies of the cluster's store,
// and moves a one-machine cluster's objects onto etcd: the work is
// controlplane/store/snapshot's; this command parses and prints.
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
	def := cluster.DefaultConfig().Etcd
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

// Save saves the running server's snapshot to a new file.
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
	snap, err := snapshot.Save(ctx, c, file)
	if err != nil {
		return err
	}
	fmt.Fprintf(sc.r.Stdout, "Snapshot saved to %s: %s\n", file, snap)
	return nil
}

// Status prints what a snapshot holds.
func (sc *snapshotCmd) Status(file string) error {
	snap, err := snapshot.Inspect(file)
	if err != nil {
		return err
	}
	fmt.Fprintf(sc.r.Stdout, "%s: %s\n", file, snap)
	for _, c := range snap.Bolt.Objects {
		fmt.Fprintf(sc.r.Stdout, "  %-34s %d\n", c.Kind.GroupResource(), c.Count)
	}
	return nil
}

// Restore puts a snapshot in place for a stopped server.
func (sc *snapshotCmd) Restore(file string) error {
	res, err := snapshot.Restore(file, sc.dataDir, sc.member(), sc.r.Now())
	if err != nil {
		return err
	}
	if !res.Etcd {
		fmt.Fprintf(sc.r.Stdout, "Restored %s into %s: %s\n", file, res.Path, res.Info)
		if res.Backup != "" {
			fmt.Fprintf(sc.r.Stdout, "The previous store is kept as %s.\n", res.Backup)
		}
		fmt.Fprintf(sc.r.Stdout, "Start the server as before (skiff server --data-dir %s ...).\n", sc.dataDir)
		return nil
	}
	fmt.Fprintf(sc.r.Stdout, "Restored %s into %s (member %s, peer URL %s): %s\n", file, res.Path, sc.memberName(), sc.peerListen, res.Info)
	fmt.Fprintf(sc.r.Stdout, "Start the server on it with:\n  skiff server --cluster-init --data-dir %s --etcd-peer-listen %s ...\nthen join the other servers to it afresh (empty data directories).\n", sc.dataDir, sc.peerListen)
	return nil
}

// memberName is --name, or the name `skiff server` gives its member.
func (sc *snapshotCmd) memberName() string {
	if sc.name != "" {
		return sc.name
	}
	return cluster.DefaultConfig().NodeName
}

// member is the etcd member of the flags.
func (sc *snapshotCmd) member() snapshot.Member {
	return snapshot.Member{Name: sc.memberName(), PeerURL: sc.peerListen, ClientURL: sc.clientListen, Log: sc.r.Logger()}
}

// Migrate copies a bbolt store into etcd: a new embedded member in
// DIR/etcd (started here, stopped at the end) or an external etcd.
func (sc *snapshotCmd) Migrate(ctx context.Context) error {
	to := snapshot.Target{DataDir: sc.dataDir, Member: sc.member()}
	if sc.etcdEndpoints != "" {
		to.EtcdEndpoints = strings.Split(sc.etcdEndpoints, ",")
	}
	res, err := snapshot.Migrate(ctx, sc.from, to)
	if err != nil {
		return err
	}
	for _, c := range res.Copied {
		fmt.Fprintf(sc.r.Stdout, "  %-34s %d\n", c.Kind.GroupResource(), c.Count)
	}
	fmt.Fprintf(sc.r.Stdout, "Copied %d objects from %s into etcd (%s); %s is unchanged.\n", res.Total(), sc.from, res.Where, sc.from)
	if sc.etcdEndpoints != "" {
		fmt.Fprintf(sc.r.Stdout, "Start the server with:\n  skiff server --etcd-endpoints %s ...\n", sc.etcdEndpoints)
	} else {
		fmt.Fprintf(sc.r.Stdout, "Start the server with:\n  skiff server --cluster-init --data-dir %s --etcd-peer-listen %s --etcd-client-listen %s ...\n", sc.dataDir, sc.peerListen, sc.clientListen)
	}
	return nil
}
