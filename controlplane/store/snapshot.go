package store

// Snapshots: a consistent copy of a running Bolt store, a check that a
// file is a skiff store, its restore into a data directory, and Copy,
// which moves every object from one Store to another (bbolt to etcd).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"golang.org/x/sys/unix"

	"skiff.dev/skiff/api"
)

// ErrNotStore means a file is not a whole skiff store: not a bbolt file,
// a bbolt file without skiff's buckets (an etcd snapshot is one too), or
// a damaged one (then the error is ErrDamaged too).
var ErrNotStore = errors.New("not a whole skiff store")

// ErrDamaged means a snapshot or store file is damaged or cut short: its
// sha256 trailer does not match, its pages are broken, or it ends before
// its last page.
var ErrDamaged = errors.New("damaged or cut short")

// ErrInUse means a data directory's state.db is held by a running server.
var ErrInUse = errors.New("store is in use by a running skiff server")

// ErrNotEmpty means Copy's destination already holds objects.
var ErrNotEmpty = errors.New("destination store is not empty")

// StateFile is the store's file name in a data directory.
const StateFile = "state.db"

// Snapshot writes a consistent copy of the whole database to w: one bbolt
// read transaction, so writes go on while it streams and none of them is
// half in the copy. The copy is the bbolt file followed by the sha256 of
// it, the format of an etcd snapshot: Inspect and RestoreBolt check the
// sum, and bbolt opens the file as it is. ctx ends the copy between writes
// to w.
func (b *Bolt) Snapshot(ctx context.Context, w io.Writer) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	h := sha256.New()
	cw := ctxWriter{ctx: ctx, w: io.MultiWriter(w, h)}
	err := b.db.View(func(tx *bolt.Tx) error {
		_, err := tx.WriteTo(cw)
		return err
	})
	if err == nil {
		_, err = cw.Write(h.Sum(nil))
	}
	if err != nil {
		return fmt.Errorf("snapshot store: %w", err)
	}
	return nil
}

// ctxWriter fails writes once ctx has ended.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// KindCount is how many objects of one kind a store holds.
type KindCount struct {
	Kind  *api.Kind
	Count int
}

// Info describes a store file, as Inspect read it.
type Info struct {
	// Revision is the store's global revision (the newest resourceVersion).
	Revision int64
	// Objects per kind, in the order of api.Kinds (kinds with none left out).
	Objects []KindCount
	// Size of the file in bytes.
	Size int64

	dbSize int64 // the database's bytes, without a sha256 trailer
}

// Total is the number of objects of every kind.
func (i Info) Total() int { return total(i.Objects) }

// Inspect checks that path is a whole, readable skiff store and counts its
// objects: the sha256 trailer matches when the file has one (a snapshot;
// a stopped server's state.db has none), bbolt's page check passes, the
// revision bucket is there, every bucket is a kind this skiff serves and
// every object decodes as its kind. A file that is no skiff store fails
// with ErrNotStore. The file is opened read-only and never changed; one a
// running server holds fails after a short wait with ErrInUse.
func Inspect(path string) (info Info, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return Info{}, fmt.Errorf("inspect %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return Info{}, fmt.Errorf("inspect %s: %w: not a regular file", path, ErrNotStore)
	}
	if fi.Size() < minFileSize {
		return Info{}, fmt.Errorf("inspect %s: %w: %d bytes, too small for a database", path, ErrNotStore, fi.Size())
	}
	dbSize, err := CheckTrailer(path, fi.Size())
	if err != nil {
		return Info{}, fmt.Errorf("inspect %s: %w", path, err)
	}
	// A damaged file can make bbolt read past the end of its memory map
	// (a fault) or panic on a bad page: both become an error here.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("inspect %s: %w: %w: %v", path, ErrNotStore, ErrDamaged, p)
		}
	}()
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: 500 * time.Millisecond})
	if errors.Is(err, berrors.ErrTimeout) {
		return Info{}, fmt.Errorf("inspect %s: %w", path, ErrInUse)
	}
	if err != nil {
		return Info{}, fmt.Errorf("inspect %s: %w: %w", path, ErrNotStore, err)
	}
	defer db.Close()
	info.Size, info.dbSize = fi.Size(), dbSize
	err = db.View(func(tx *bolt.Tx) error {
		if err := checkPages(tx, dbSize); err != nil {
			return fmt.Errorf("%w: %w", ErrNotStore, err)
		}
		meta := tx.Bucket(metaBucket)
		if meta == nil {
			return fmt.Errorf("%w: no %s bucket (a bbolt file, but not skiff's)", ErrNotStore, metaBucket)
		}
		rev, err := readRevision(meta)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrNotStore, err)
		}
		info.Revision = rev
		known := map[string]*api.Kind{}
		for _, k := range api.Kinds {
			known[k.GroupResource()] = k
		}
		counts := map[*api.Kind]int{}
		err = tx.ForEach(func(name []byte, bk *bolt.Bucket) error {
			if string(name) == string(metaBucket) {
				return nil
			}
			k := known[string(name)]
			if k == nil {
				return fmt.Errorf("%w: bucket %q is not a kind this skiff serves (a newer skiff's store?)", ErrNotStore, name)
			}
			return bk.ForEach(func(key, v []byte) error {
				if _, err := decodeValue(k, v); err != nil {
					return fmt.Errorf("%w: %s %q: %w", ErrNotStore, k.GroupResource(), key, err)
				}
				counts[k]++
				return nil
			})
		})
		if err != nil {
			return err
		}
		for _, k := range api.Kinds {
			if counts[k] > 0 {
				info.Objects = append(info.Objects, KindCount{Kind: k, Count: counts[k]})
			}
		}
		return nil
	})
	if err != nil {
		return Info{}, fmt.Errorf("inspect %s: %w", path, err)
	}
	return info, nil
}

// minFileSize: bbolt writes four pages (two meta pages, a freelist, a
// root) when it creates a file, 512 bytes each at the least.
const minFileSize = 4 * 512

// CheckTrailer returns the size of the database in a snapshot file of
// size bytes: without its sha256 trailer when it has one (its size is then
// 32 past a multiple of 512, as etcd tells its snapshots), after checking
// the sum (ErrNotStore when it does not match). Skiff's and etcd's
// snapshots have the trailer; a copied state.db has none.
func CheckTrailer(path string, size int64) (int64, error) {
	if size%512 != sha256.Size {
		return size, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyN(h, f, size-sha256.Size); err != nil {
		return 0, err
	}
	want := make([]byte, sha256.Size)
	if _, err := io.ReadFull(f, want); err != nil {
		return 0, err
	}
	if !bytes.Equal(h.Sum(nil), want) {
		return 0, fmt.Errorf("%w: %w: sha256 mismatch", ErrNotStore, ErrDamaged)
	}
	return size - sha256.Size, nil
}

// Restored is what RestoreBolt did.
type Restored struct {
	// Path of the restored store (DIR/state.db).
	Path string
	// Backup is where the previous state.db went, or "" when there was none.
	Backup string
	// Info of the restored store.
	Info Info
}

// RestoreBolt makes the snapshot file the store of dataDir: it checks the
// file with Inspect, copies it next to DIR/state.db, checks the copy, then
// renames the old state.db to state.db.bak-TIMESTAMP and the copy into its
// place. It refuses (ErrInUse) while a server holds the old state.db, and
// on any failure it leaves dataDir as it was. The server must be stopped;
// it starts on the restored objects at the snapshot's revision.
func RestoreBolt(file, dataDir string, now time.Time) (Restored, error) {
	info, err := Inspect(file)
	if err != nil {
		return Restored{}, fmt.Errorf("restore: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return Restored{}, fmt.Errorf("restore: %w", err)
	}
	dst := filepath.Join(dataDir, StateFile)
	// Hold the lock a server takes (bbolt flocks its file) while files move.
	unlock, err := lockState(dst)
	if err != nil {
		return Restored{}, fmt.Errorf("restore into %s: %w", dataDir, err)
	}
	defer unlock()
	tmp := dst + ".restore-tmp"
	if err := copyFile(tmp, file, info.dbSize); err != nil {
		os.Remove(tmp)
		return Restored{}, fmt.Errorf("restore into %s: %w", dataDir, err)
	}
	if _, err := Inspect(tmp); err != nil {
		os.Remove(tmp)
		return Restored{}, fmt.Errorf("restore into %s: the copy does not check: %w", dataDir, err)
	}
	out := Restored{Path: dst, Info: info}
	if _, err := os.Stat(dst); err == nil {
		out.Backup = dst + ".bak-" + now.UTC().Format("20060102T150405Z")
		if err := os.Rename(dst, out.Backup); err != nil {
			os.Remove(tmp)
			return Restored{}, fmt.Errorf("restore into %s: keep the old store: %w", dataDir, err)
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		if out.Backup != "" {
			_ = os.Rename(out.Backup, dst)
		}
		os.Remove(tmp)
		return Restored{}, fmt.Errorf("restore into %s: %w", dataDir, err)
	}
	if d, err := os.Open(dataDir); err == nil {
		_ = d.Sync() // the renames are durable
		d.Close()
	}
	return out, nil
}

// lockState takes the exclusive flock bbolt takes on path (when the file
// exists), so that a running server is detected and none starts meanwhile.
func lockState(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return func() {}, nil
	}
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w; stop it first", path, ErrInUse)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// copyFile copies the first n bytes of src to a new file dst and syncs it.
func copyFile(dst, src string, n int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(out, in, n); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Copy copies every object of every kind (api.Kinds) from src to dst, as
// a migration from one store to another (bbolt to etcd): uids, creation
// timestamps, labels, owner references, specs and statuses stay; each
// object gets dst's next revision as its resourceVersion. dst must hold
// no object at all (ErrNotEmpty): nothing may run against it yet, not even
// a server that created the default namespaces. On a failure part way dst
// holds part of the objects; the error says how far it got.
func Copy(ctx context.Context, dst, src Store) ([]KindCount, error) {
	for _, k := range api.Kinds {
		objs, _, err := dst.List(ctx, k, "")
		if err != nil {
			return nil, fmt.Errorf("copy: list %s in the destination: %w", k.GroupResource(), err)
		}
		if len(objs) > 0 {
			m := objs[0].GetObjectMeta()
			return nil, fmt.Errorf("copy: %w: it holds %s %q (and %d more of that kind); copy into a fresh store", ErrNotEmpty, k.GroupResource(), key(m.Namespace, m.Name), len(objs)-1)
		}
	}
	var out []KindCount
	for _, k := range api.Kinds {
		objs, _, err := src.List(ctx, k, "")
		if err != nil {
			return out, fmt.Errorf("copy: list %s: %w", k.GroupResource(), err)
		}
		for _, o := range objs {
			if _, err := dst.Create(ctx, o); err != nil {
				m := o.GetObjectMeta()
				return out, fmt.Errorf("copy: create %s %q (after %d objects): %w", k.GroupResource(), key(m.Namespace, m.Name), total(out), err)
			}
		}
		if len(objs) > 0 {
			out = append(out, KindCount{Kind: k, Count: len(objs)})
		}
	}
	return out, nil
}

func total(cs []KindCount) int {
	n := 0
	for _, c := range cs {
		n += c.Count
	}
	return n
}

func key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
