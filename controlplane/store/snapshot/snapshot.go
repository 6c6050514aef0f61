// Package snapshot saves, checks, restores and migrates copies of a
// cluster's store, for `skiff snapshot` (which parses and prints). A
// snapshot is the store's own file format, so each store restores its own
// kind: the bbolt file of a one-machine server (state.db, package store),
// or an etcd snapshot of a server on etcd (the file `etcdctl snapshot
// save` writes, package store/etcdstore).
//
//   - Save streams the running server's snapshot into a new file, checked
//     before it takes its name: an existing file is never overwritten.
//   - Inspect tells a bbolt store from an etcd snapshot and checks it.
//   - Restore puts a snapshot in a stopped server's data directory: a bbolt
//     file replaces state.db (the old one kept aside), an etcd snapshot
//     becomes a new one-member etcd data directory (never over an
//     existing one: it may hold the only copy of the cluster).
//   - Migrate copies every object of a bbolt store into etcd (a new
//     embedded member, or an external etcd holding no object yet).
//
// Moved here from cli/snapshot.go (issue 25: a thin CLI).
package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	etcdsnapshot "go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/apiserver"
	"skiff.dev/skiff/controlplane/etcd"
	"skiff.dev/skiff/controlplane/store"
	"skiff.dev/skiff/controlplane/store/etcdstore"
	"skiff.dev/skiff/pki"
)

// Info is a checked snapshot: a skiff bbolt store (Bolt) or an etcd
// snapshot (Etcd set).
type Info struct {
	Bolt store.Info
	Etcd *etcdsnapshot.Status
}

func (s Info) String() string {
	if s.Etcd != nil {
		return fmt.Sprintf("etcd snapshot (storage %s), revision %d, %d keys, %d bytes", s.Etcd.Version, s.Etcd.Revision, s.Etcd.TotalKey, s.Etcd.TotalSize)
	}
	var kinds []string
	for _, c := range s.Bolt.Objects {
		kinds = append(kinds, fmt.Sprintf("%d %s", c.Count, c.Kind.GroupResource()))
	}
	return fmt.Sprintf("skiff bbolt store, revision %d, %d objects (%s), %d bytes", s.Bolt.Revision, s.Bolt.Total(), strings.Join(kinds, ", "), s.Bolt.Size)
}

// Save streams the snapshot of the server c talks to into a temporary
// file beside file, checks it (the server's status trailer, then the file
// itself) and only then names it file. An existing file is never
// overwritten.
func Save(ctx context.Context, c *client.Client, file string) (Info, error) {
	if _, err := os.Lstat(file); err == nil {
		return Info{}, fmt.Errorf("snapshot save: %s exists; remove it or choose another name", file)
	}
	resp, err := c.Do(ctx, http.MethodGet, apiserver.SnapshotPath, nil)
	if err != nil {
		return Info{}, fmt.Errorf("snapshot save: %w", err)
	}
	defer resp.Body.Close()
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".part-*")
	if err != nil {
		return Info{}, fmt.Errorf("snapshot save: %w", err)
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name()) // file is a second link to it, or nothing was saved
	}()
	n, err := io.Copy(tmp, resp.Body)
	if err != nil {
		return Info{}, fmt.Errorf("snapshot save: receive: %w (after %d bytes)", err, n)
	}
	if st := resp.Trailer.Get(apiserver.SnapshotStatusTrailer); st != "ok" {
		if st == "" {
			st = "the server did not finish it"
		}
		return Info{}, fmt.Errorf("snapshot save: the copy is incomplete: %s", st)
	}
	if err := tmp.Sync(); err != nil {
		return Info{}, fmt.Errorf("snapshot save: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return Info{}, fmt.Errorf("snapshot save: %w", err)
	}
	snap, err := Inspect(tmp.Name())
	if err != nil {
		return Info{}, fmt.Errorf("snapshot save: the received copy does not check: %w", err)
	}
	if err := os.Link(tmp.Name(), file); err != nil { // fails when file appeared meanwhile
		return Info{}, fmt.Errorf("snapshot save: %w", err)
	}
	return snap, nil
}

// Member is the etcd member a server will run (restore of an etcd
// snapshot, migrate): its name and URLs, as `skiff server` takes them.
type Member struct {
	Name               string
	PeerURL, ClientURL string
	// Log is the embedded member's, while Migrate runs it.
	Log *slog.Logger
}

// Target is where Migrate copies to: an external etcd (EtcdEndpoints), or
// else a new embedded Member in DataDir/etcd (DataDir is the server's
// data directory).
type Target struct {
	DataDir       string
	EtcdEndpoints []string
	Member        Member
}

// Restored says where Restore put a snapshot.
type Restored struct {
	Info Info
	// Path is the restored bbolt store, or the new etcd member directory
	// (Etcd true).
	Path string
	Etcd bool
	// Backup is where the previous bbolt store was kept ("" when none).
	Backup string
}

// EtcdClusterToken is the initial cluster token of skiff's embedded
// members (controlplane/etcd sets it).
const EtcdClusterToken = "skiff"

// Restore puts a snapshot in place for a stopped server: a bbolt snapshot
// replaces dataDir/state.db (now names the backup of the old one), an etcd
// snapshot becomes the new member m in dataDir/etcd.
func Restore(file, dataDir string, m Member, now time.Time) (Restored, error) {
	snap, err := Inspect(file)
	if err != nil {
		return Restored{}, fmt.Errorf("snapshot restore: %w", err)
	}
	if snap.Etcd == nil {
		res, err := store.RestoreBolt(file, dataDir, now)
		if err != nil {
			return Restored{}, fmt.Errorf("snapshot restore: %w", err)
		}
		return Restored{Info: snap, Path: res.Path, Backup: res.Backup}, nil
	}
	out, err := newMemberDir(dataDir)
	if err != nil {
		return Restored{}, fmt.Errorf("snapshot restore: %w", err)
	}
	err = etcdsnapshot.NewV3(zap.NewNop()).Restore(etcdsnapshot.RestoreConfig{
		SnapshotPath:        file,
		Name:                m.Name,
		OutputDataDir:       out,
		PeerURLs:            []string{m.PeerURL},
		InitialCluster:      m.Name + "=" + m.PeerURL,
		InitialClusterToken: EtcdClusterToken,
	})
	if err != nil {
		os.RemoveAll(out) // nothing half-restored stays behind
		return Restored{}, fmt.Errorf("snapshot restore: etcd: %w", err)
	}
	return Restored{Info: snap, Path: out, Etcd: true}, nil
}

// newMemberDir is dataDir/etcd, which must not exist yet: an etcd
// member's data is never overwritten (it may be the only copy of the
// cluster).
func newMemberDir(dataDir string) (string, error) {
	out := filepath.Join(dataDir, "etcd")
	if _, err := os.Stat(out); err == nil {
		return "", fmt.Errorf("%s exists: a new etcd member needs a new directory; stop the server and move it away first (it may hold the only copy of the cluster)", out)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", err
	}
	return out, nil
}

// Migrated says what Migrate copied, and where.
type Migrated struct {
	Copied []store.KindCount
	// Where is the external etcd's endpoints, or the new member's
	// directory.
	Where string
}

// Total is the number of objects copied.
func (m Migrated) Total() int {
	n := 0
	for _, c := range m.Copied {
		n += c.Count
	}
	return n
}

// Migrate copies the bbolt store from into etcd: an external etcd
// (to.EtcdEndpoints), or a new embedded member in to.DataDir/etcd (started
// here, stopped at the end). The source is not changed.
func Migrate(ctx context.Context, from string, to Target) (Migrated, error) {
	m := to.Member
	src, err := openBoltForCopy(from)
	if err != nil {
		return Migrated{}, fmt.Errorf("snapshot migrate: %w", err)
	}
	defer src.Close()
	var cli *clientv3.Client
	where := strings.Join(to.EtcdEndpoints, ",")
	if len(to.EtcdEndpoints) > 0 {
		cli, err = clientv3.New(clientv3.Config{Endpoints: to.EtcdEndpoints, DialTimeout: 5 * time.Second})
		if err != nil {
			return Migrated{}, fmt.Errorf("snapshot migrate: connect to etcd %s: %w", where, err)
		}
		defer cli.Close()
	} else {
		dir, err := newMemberDir(to.DataDir)
		if err != nil {
			return Migrated{}, fmt.Errorf("snapshot migrate: %w", err)
		}
		// The member speaks TLS with the cluster CA as the server will
		// (made here when the data dir has none yet, as the server would).
		ca, err := pki.LoadOrCreateCA(filepath.Join(to.DataDir, "pki"))
		if err != nil {
			return Migrated{}, fmt.Errorf("snapshot migrate: %w", err)
		}
		tlsc, err := etcd.ServerTLS(to.DataDir, ca, m.PeerURL, m.ClientURL)
		if err != nil {
			return Migrated{}, fmt.Errorf("snapshot migrate: %w", err)
		}
		em, err := etcd.StartEmbedded(ctx, etcd.Config{Name: m.Name, DataDir: dir, PeerURL: m.PeerURL, ClientURL: m.ClientURL, TLS: tlsc, Log: m.Log})
		if err != nil {
			os.RemoveAll(dir)
			return Migrated{}, fmt.Errorf("snapshot migrate: %w", err)
		}
		defer em.Stop()
		cli, where = em.Client(), dir
	}
	dst, err := etcdstore.New(ctx, cli, etcdstore.Options{Logger: m.Log})
	if err != nil {
		return Migrated{}, fmt.Errorf("snapshot migrate: open the etcd store: %w", err)
	}
	defer dst.Close()
	copied, err := store.Copy(ctx, dst, src)
	if err != nil {
		return Migrated{}, fmt.Errorf("snapshot migrate into %s: %w", where, err)
	}
	return Migrated{Copied: copied, Where: where}, nil
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

// Inspect tells a skiff bbolt store from an etcd snapshot and checks it:
// the store through store.Inspect, the etcd snapshot by its sha256
// trailer and etcd's own status check.
func Inspect(path string) (Info, error) {
	info, err := store.Inspect(path)
	switch {
	case err == nil:
		return Info{Bolt: info}, nil
	case errors.Is(err, store.ErrDamaged):
		return Info{}, fmt.Errorf("%s is no whole snapshot: %w", path, err)
	case !errors.Is(err, store.ErrNotStore):
		return Info{}, err
	}
	st, eerr := inspectEtcd(path)
	if eerr == nil {
		return Info{Etcd: &st}, nil
	}
	return Info{}, fmt.Errorf("%s is neither a skiff store nor an etcd snapshot: as a store: %w; as an etcd snapshot: %w", path, err, eerr)
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
