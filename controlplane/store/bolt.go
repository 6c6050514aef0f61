package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"skiff.dev/skiff/api"
)

var _ Store = (*Bolt)(nil)

// ErrClosed is returned by every method called after Close.
var ErrClosed = errors.New("store is closed")

// metaBucket holds the revision counter. Its name cannot clash with a kind's
// bucket: resource names are DNS labels and never start with "_".
var (
	metaBucket  = []byte("_meta")
	revisionKey = []byte("revision")
)

// Bolt is the bbolt-backed Store. Create it with Open; it owns a committer
// goroutine, an Event sweeper and one goroutine per watcher, all stopped by
// Close.
type Bolt struct {
	db   *bolt.DB
	path string
	opts Options
	log  *slog.Logger

	// rev is the last committed revision; only the committer writes it.
	rev atomic.Int64

	// mu guards closed against enqueues racing Close: enqueue holds it for
	// reading while it hands an op to the committer.
	mu     sync.RWMutex
	closed bool
	ops    chan *op

	hub *hub

	stopSweep context.CancelFunc
	done      chan struct{} // closed by Close: watchers stop delivering
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	stats counters
	// diskFull is set while commits fail for want of space (the committer's
	// alone): the store says so once, and once again when space returns.
	diskFull bool
	// packer packs the committer's values (value.go).
	packer valuePacker
	// memo holds decoded namespaces and ServiceAccounts for get (memo.go).
	memo decodeMemo
	// writes counts the committed writes by kind and namespace (writes.go).
	writes writeCounts
	// recent holds the last written objects, where GuaranteedUpdate
	// starts (recent.go).
	recent recentWrites
	// expiry knows when the sweep may find an expired Event (expire.go).
	expiry eventExpiry
}

// counters are the store's statistics, read by Stats.
type counters struct {
	batches, commits, writes, failed, expired atomic.Uint64
	// recentStarts counts GuaranteedUpdate's tries that started from a
	// recent write (recent.go) instead of a read.
	recentStarts atomic.Uint64
	// sweepReads counts the Event sweeps that read the Events (expire.go).
	sweepReads atomic.Uint64
}

// Stats is a snapshot of the store's counters, for metrics.
type Stats struct {
	// Revision is the current global revision.
	Revision int64
	// Batches handled by the committer (one or more writes each).
	Batches uint64
	// Commits are bbolt transactions committed (one fsync each); a batch in
	// which every write failed commits nothing.
	Commits uint64
	// Writes that succeeded (each one a revision).
	Writes uint64
	// FailedWrites: conflicts, not-found, already-exists.
	FailedWrites uint64
	// ExpiredEvents deleted by the sweeper.
	ExpiredEvents uint64
	// RecentStarts counts GuaranteedUpdate's tries that started from the
	// object's last write instead of a read of the store (recent.go).
	RecentStarts uint64
	// Watchers open now.
	Watchers int
	// SlowWatchersClosed counts watchers closed for falling behind.
	SlowWatchersClosed uint64
}

// Stats returns the current counters.
func (b *Bolt) Stats() Stats {
	w, slow := b.hub.stats()
	return Stats{
		Revision:           b.rev.Load(),
		Batches:            b.stats.batches.Load(),
		Commits:            b.stats.commits.Load(),
		Writes:             b.stats.writes.Load(),
		FailedWrites:       b.stats.failed.Load(),
		ExpiredEvents:      b.stats.expired.Load(),
		RecentStarts:       b.stats.recentStarts.Load(),
		Watchers:           w,
		SlowWatchersClosed: slow,
	}
}

// boltOptions are the bbolt options of a store opened for writing.
//
//   - InitialMmapSize 1 GiB: bbolt remaps (blocking every reader) each
//     time the file outgrows its mapping; one large mapping costs address
//     space only. What the resident size counts of it is the pages read
//     or written since the start (file pages, the kernel can drop them).
//   - FreelistMapType: allocation from a hash of free spans, not a sorted
//     array (bbolt's array freelist slows down as the file fragments).
//   - NoFreelistSync, as etcd sets on Linux: the freelist is not written
//     at every commit but rebuilt from the pages when the file is opened.
//     Written, it is a run of contiguous pages (8 bytes per free page: 29
//     pages for the 14,665 free pages of the 20k-pod benchmark's file)
//     that every commit allocates, writes and frees: concurrent writes
//     2.29× faster without it (docs/performance.md, "Memory at scale",
//     fourth sitting). An older skiff opening such a file rebuilds the
//     freelist itself (bbolt writes it back on its first commit).
func boltOptions(o Options) *bolt.Options {
	return &bolt.Options{
		Timeout:         time.Second,
		NoSync:          o.NoSync,
		InitialMmapSize: 1 << 30,
		FreelistType:    bolt.FreelistMapType,
		NoFreelistSync:  true,
	}
}

// Open opens (or creates) the database at path and starts the store's
// goroutines. The file is locked: a second Open of the same path waits one
// second and fails.
func Open(path string, opts Options) (*Bolt, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	opts = opts.withDefaults()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	// An existing file is checked before anything writes to it: a damaged
	// or cut-short one is refused (DamagedError), never replaced.
	size, existed, err := statExisting(path)
	if err != nil {
		return nil, err
	}
	if existed {
		if err := checkFile(path, size); err != nil {
			return nil, err
		}
	}
	var db *bolt.DB
	err = guard(func() (err error) {
		db, err = bolt.Open(path, 0o600, boltOptions(opts))
		return err
	})
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("open store %s: %w: stop it, or give this server its own --data-dir", path, ErrInUse)
	case err != nil && existed:
		return nil, &DamagedError{Path: path, Err: err}
	case err != nil:
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	var rev int64
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return err
		}
		for _, k := range api.Kinds {
			if _, err := tx.CreateBucketIfNotExists([]byte(k.GroupResource())); err != nil {
				return fmt.Errorf("bucket %s: %w", k.GroupResource(), err)
			}
		}
		rev, err = readRevision(meta)
		return err
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	b := &Bolt{
		db:   db,
		path: path,
		opts: opts,
		log:  opts.Logger.With("component", "store"),
		ops:  make(chan *op, opts.MaxBatch),
		hub:  newHub(opts.HistorySize, opts.WatchBuffer, rev),
		done: make(chan struct{}),
	}
	b.rev.Store(rev)
	if existed {
		b.log.Debug("opened", "path", path, "revision", rev)
	} else {
		b.log.Info("created an empty store", "path", path)
	}

	ctx, cancel := context.WithCancel(context.Background())
	b.stopSweep = cancel
	b.wg.Add(2)
	go func() {
		defer b.wg.Done()
		b.commitLoop()
	}()
	go func() {
		defer b.wg.Done()
		b.sweepLoop(ctx)
	}()
	return b, nil
}

// Close stops the sweeper, commits what is queued, closes every watcher and
// the database. Safe to call twice; the second call returns the first's result.
func (b *Bolt) Close() error {
	b.closeOnce.Do(func() {
		b.stopSweep()
		b.mu.Lock()
		b.closed = true
		close(b.ops) // the committer drains what is queued, then returns
		b.mu.Unlock()
		close(b.done)
		b.wg.Wait()
		b.hub.close()
		if err := b.db.Close(); err != nil {
			b.closeErr = fmt.Errorf("close store: %w", err)
		}
	})
	return b.closeErr
}

// Revision is the last committed revision.
func (b *Bolt) Revision() int64 { return b.rev.Load() }

// Create stores a new object, setting uid and creationTimestamp when empty.
func (b *Bolt) Create(ctx context.Context, obj api.Object) (api.Object, error) {
	k, cp, err := prepare(obj)
	if err != nil {
		return nil, err
	}
	out, _, err := b.create(ctx, k, cp, false, false, nil)
	return out, err
}

// CreateEncoded is Create of an object the caller gives up, that also
// returns the JSON stored for it (store.EncodingCreator).
func (b *Bolt) CreateEncoded(ctx context.Context, obj api.Object, share bool) (api.Object, []byte, error) {
	k, err := prepareOwned(obj)
	if err != nil {
		return nil, nil, err
	}
	return b.create(ctx, k, obj, true, share, nil)
}

// create stores cp, the store's own object; given: the caller gets it back
// (CreateEncoded), so create returns only once the committer is done with
// it, a canceled ctx included; share: the caller only reads it, and the
// live watchers get cp itself (store.EncodingCreator). after are the
// writes it depends on (CreateEncodedAfter).
func (b *Bolt) create(ctx context.Context, k *api.Kind, cp api.Object, given, share bool, after []*op) (api.Object, []byte, error) {
	m := cp.GetObjectMeta()
	if m.UID == "" {
		m.UID = newUID()
	}
	if m.CreationTimestamp.IsZero() {
		m.CreationTimestamp = api.NewTime(b.opts.Now().Truncate(time.Second))
	}
	m.ResourceVersion = ""
	o := &op{typ: opCreate, kind: k, namespace: m.Namespace, name: m.Name, obj: cp, after: after}
	if err := o.preEncode(b.rev.Load() + 1); err != nil {
		return nil, nil, err
	}
	b.liveCopy(o, share)
	do := b.do
	if given {
		do = b.doAll
	}
	if err := do(ctx, o); err != nil {
		return nil, nil, err
	}
	return o.obj, o.raw, nil
}

// Update replaces an existing object. A non-empty resourceVersion must match
// the stored one; a non-empty uid must match too. Empty uid and
// creationTimestamp are kept from the stored object.
func (b *Bolt) Update(ctx context.Context, obj api.Object) (api.Object, error) {
	o, err := b.updateOp(obj)
	if err != nil {
		return nil, err
	}
	if err := b.do(ctx, o); err != nil {
		return nil, err
	}
	return o.obj, nil
}

// updateOp is the op of Update(obj), ready to queue.
func (b *Bolt) updateOp(obj api.Object) (*op, error) {
	k, cp, err := prepare(obj)
	if err != nil {
		return nil, err
	}
	m := cp.GetObjectMeta()
	o := &op{typ: opUpdate, kind: k, namespace: m.Namespace, name: m.Name, obj: cp, wantRV: m.ResourceVersion}
	if o.wantRV != "" {
		if _, err := parseRevision(o.wantRV); err != nil {
			return nil, err
		}
	}
	if err := o.preEncode(b.rev.Load() + 1); err != nil {
		return nil, err
	}
	b.liveCopy(o, false)
	return o, nil
}

// Delete removes an object and returns its last state, with the delete's
// revision as resourceVersion.
func (b *Bolt) Delete(ctx context.Context, kind *api.Kind, namespace, name string, pre *api.Preconditions) (api.Object, error) {
	o := &op{typ: opDelete, kind: kind, namespace: namespace, name: name}
	if pre != nil {
		if pre.UID != nil {
			o.wantUID = *pre.UID
		}
		if pre.ResourceVersion != nil {
			o.wantRV = *pre.ResourceVersion
		}
	}
	if err := b.do(ctx, o); err != nil {
		return nil, err
	}
	return o.obj, nil
}

// Get returns a fresh copy of one object, or NotFound.
func (b *Bolt) Get(ctx context.Context, kind *api.Kind, namespace, name string) (api.Object, error) {
	obj, _, err := b.get(ctx, kind, namespace, name, false)
	return obj, err
}

// GetShared is Get of an object the caller never changes
// (store.SharedGetter): for a namespace or a ServiceAccount, the memo's
// decoded object itself, no copy.
func (b *Bolt) GetShared(ctx context.Context, kind *api.Kind, namespace, name string) (api.Object, error) {
	obj, _, err := b.get(ctx, kind, namespace, name, true)
	return obj, err
}

// GetMeta is Get with only the type and metadata decoded (store.MetaGetter).
func (b *Bolt) GetMeta(ctx context.Context, kind *api.Kind, namespace, name string) (api.Object, error) {
	if memoized(kind) {
		return b.Get(ctx, kind, namespace, name) // as cheap, and complete
	}
	// The last write's object, when recent has it, is the stored one (the
	// committer puts every committed write in and takes deletes out): its
	// metadata without a read, a decompression and a decode. A trace append
	// after every bind is the reason.
	if err := b.checkRead(ctx); err != nil {
		return nil, err
	}
	if e, _, ok := b.recent.entry(bucketKey(kind.GroupResource(), api.Key(namespace, name))); ok {
		meta := kind.New()
		*meta.GetTypeMeta() = *e.obj.GetTypeMeta()
		e.obj.GetObjectMeta().DeepCopyInto(meta.GetObjectMeta())
		return meta, nil
	}
	raw, _, _, err := b.read(ctx, kind, namespace, name)
	if err != nil {
		return nil, err
	}
	obj, err := api.DecodeStoredMeta(kind, raw)
	if err != nil {
		return nil, api.NewInternal(fmt.Errorf("decode stored %s: %w", kind.GroupResource(), err))
	}
	return obj, nil
}

// get returns the object and its stored JSON (decompressed; the caller's
// to read, never to change: they may be the memo's). The object is a copy
// unless shared.
func (b *Bolt) get(ctx context.Context, kind *api.Kind, namespace, name string, shared bool) (api.Object, []byte, error) {
	raw, hit, writes, err := b.read(ctx, kind, namespace, name)
	if err != nil {
		return nil, nil, err
	}
	if hit.obj != nil {
		if shared {
			return hit.obj, hit.raw, nil
		}
		return api.Clone(hit.obj), hit.raw, nil
	}
	obj, err := decode(kind, raw)
	if err != nil {
		return nil, nil, err
	}
	if memoized(kind) && b.memo.remember(bucketKey(kind.GroupResource(), api.Key(namespace, name)), raw, obj, writes) && !shared {
		obj = api.Clone(obj)
	}
	return obj, raw, nil
}

// read returns a copy of one object's stored JSON (decompressed) or, for
// a memoized kind whose JSON is unchanged, its memo entry instead;
// NotFound when there is no such object. For a memoized kind it also
// returns the count of writes noted before the read (memo.go).
func (b *Bolt) read(ctx context.Context, kind *api.Kind, namespace, name string) ([]byte, memoEntry, uint64, error) {
	if err := b.checkRead(ctx); err != nil {
		return nil, memoEntry{}, 0, err
	}
	var (
		raw    []byte
		memo   = memoized(kind)
		key    = api.Key(namespace, name)
		hit    memoEntry
		hkey   string
		writes uint64 // for the memo: noted before the read
	)
	if memo {
		hkey = bucketKey(kind.GroupResource(), key)
		writes = b.writes.get(kind.GroupResource(), namespace)
		if e, ok := b.memo.current(hkey, writes); ok {
			return e.raw, e, writes, nil
		}
	}
	err := b.db.View(func(tx *bolt.Tx) error {
		if bk := tx.Bucket([]byte(kind.GroupResource())); bk != nil {
			v := bk.Get([]byte(key))
			if v == nil {
				return nil
			}
			js, fresh, err := unpackValue(v)
			if err != nil {
				return err
			}
			if memo {
				var ok bool
				if hit, ok = b.memo.lookup(hkey, js, writes); ok {
					return nil
				}
			}
			if raw = js; !fresh {
				raw = bytes.Clone(js) // STYLE 11: copy before the tx ends
			}
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, memoEntry{}, 0, api.NewInternal(fmt.Errorf("get %s %s: %w", kind.GroupResource(), key, err))
	case hit.obj != nil:
		return hit.raw, hit, writes, nil
	case raw == nil:
		if memo {
			b.memo.forget(hkey)
		}
		return nil, memoEntry{}, 0, api.NewNotFound(kind, name)
	}
	return raw, memoEntry{}, writes, nil
}

// List returns the objects of a kind, in one namespace or all, sorted by
// key, and the revision they were read at.
func (b *Bolt) List(ctx context.Context, kind *api.Kind, namespace string) ([]api.Object, int64, error) {
	return b.list(ctx, kind, namespace, nil)
}

// ListFiltered is List of the objects whose JSON keep accepts
// (FilteredLister); the others are not decoded.
func (b *Bolt) ListFiltered(ctx context.Context, kind *api.Kind, namespace string, keep func(json []byte) bool) ([]api.Object, int64, error) {
	return b.list(ctx, kind, namespace, keep)
}

// list is List, of the objects keep accepts when keep is not nil.
func (b *Bolt) list(ctx context.Context, kind *api.Kind, namespace string, keep func(json []byte) bool) ([]api.Object, int64, error) {
	if err := b.checkRead(ctx); err != nil {
		return nil, 0, err
	}
	var (
		out []api.Object
		rev int64
	)
	err := b.db.View(func(tx *bolt.Tx) error {
		var err error
		if rev, err = readRevision(tx.Bucket(metaBucket)); err != nil {
			return err
		}
		bk := tx.Bucket([]byte(kind.GroupResource()))
		if bk == nil {
			return nil
		}
		c := bk.Cursor()
		var prefix []byte
		if namespace != "" && kind.Namespaced {
			prefix = []byte(namespace + "/")
		}
		var buf []byte // the values' JSON, decompressed: one's room is the next one's
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			raw, err := unpackValueTo(buf[:0], v)
			if err != nil {
				return api.NewInternal(fmt.Errorf("decode stored %s: %w", kind.GroupResource(), err))
			}
			if compressed(v) {
				buf = raw
			}
			if keep != nil && !keep(raw) {
				continue
			}
			// The decode copies: nothing of raw (buf, or bbolt's page)
			// outlives this value (TestDecodeStoredIsUnmarshal).
			obj, err := decode(kind, raw)
			if err != nil {
				return err
			}
			out = append(out, obj)
		}
		return nil
	})
	if err != nil {
		var se *api.StatusError
		if errors.As(err, &se) {
			return nil, 0, err
		}
		return nil, 0, api.NewInternal(fmt.Errorf("list %s: %w", kind.GroupResource(), err))
	}
	return out, rev, nil
}

// Count is the number of objects List would return, none decoded
// (Counter).
func (b *Bolt) Count(ctx context.Context, kind *api.Kind, namespace string) (int, error) {
	if err := b.checkRead(ctx); err != nil {
		return 0, err
	}
	n := 0
	err := b.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(kind.GroupResource()))
		if bk == nil {
			return nil
		}
		var prefix []byte
		if namespace != "" && kind.Namespaced {
			prefix = []byte(namespace + "/")
		}
		c := bk.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		return 0, api.NewInternal(fmt.Errorf("count %s: %w", kind.GroupResource(), err))
	}
	return n, nil
}

// ListExact returns the objects of a kind as they were at revision rev.
// Bolt keeps only current objects: it serves rev when its watch history
// shows no change of the kind (in namespace) after rev, and fails with Gone
// otherwise, as kube-apiserver does for a compacted revision.
func (b *Bolt) ListExact(ctx context.Context, kind *api.Kind, namespace string, rev int64) ([]api.Object, error) {
	if rev <= 0 {
		return nil, ErrBadListRevision(rev)
	}
	items, cur, err := b.List(ctx, kind, namespace)
	if err != nil {
		return nil, err
	}
	switch {
	case rev == cur:
		return items, nil
	case rev > cur:
		return nil, api.NewTooLargeResourceVersion(rev, cur, 0)
	}
	// The list was read at cur; its events may still be on their way to
	// the history.
	if err := b.hub.waitFor(ctx, cur); err != nil {
		return nil, err
	}
	if !kind.Namespaced {
		namespace = ""
	}
	if changed, known := b.hub.changed(kind.GroupResource(), namespace, rev, cur); changed || !known {
		return nil, ErrListTooOld()
	}
	return items, nil
}

// WaitForRevision blocks until revision rev is committed and published to
// watchers, ctx ends or the store closes.
func (b *Bolt) WaitForRevision(ctx context.Context, rev int64) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	return b.hub.waitFor(ctx, rev)
}

// GuaranteedUpdate reads the object, applies tryUpdate to a copy and writes
// the result with the read resourceVersion, retrying on conflict until ctx
// ends. A result byte-equal to the stored object is not written. The
// result is written as it is, not copied (updateOwned).
//
// The first try starts from the object's last write when it is among the
// recent ones (recent.go) instead of reading the store; what that start
// decides is checked against the store: a write conflicts if it was not
// the stored object, and a tryUpdate error, or a result that changes
// nothing, is taken only once the store's object gives it, as
// kube-apiserver does with its watch cache's object.
func (b *Bolt) GuaranteedUpdate(ctx context.Context, kind *api.Kind, namespace, name string, tryUpdate func(cur api.Object) (api.Object, error)) (api.Object, error) {
	return b.guaranteedUpdate(ctx, kind, namespace, name, tryUpdate, false, false)
}

// GuaranteedUpdateReadOnly is GuaranteedUpdate for a tryUpdate that only
// reads cur and returns an object of its own (store.ReadOnlyUpdater): cur
// may be the object the live watchers share, not a copy of it.
func (b *Bolt) GuaranteedUpdateReadOnly(ctx context.Context, kind *api.Kind, namespace, name string, tryUpdate func(cur api.Object) (api.Object, error)) (api.Object, error) {
	return b.guaranteedUpdate(ctx, kind, namespace, name, tryUpdate, false, true)
}

// GuaranteedUpdateShared is GuaranteedUpdate for a caller that does not
// keep what it writes (store.SharingUpdater): the live watchers get
// tryUpdate's result itself, not a copy of it.
func (b *Bolt) GuaranteedUpdateShared(ctx context.Context, kind *api.Kind, namespace, name string, tryUpdate func(cur api.Object) (api.Object, error)) error {
	_, err := b.guaranteedUpdate(ctx, kind, namespace, name, tryUpdate, true, false)
	return err
}

// guaranteedUpdate is GuaranteedUpdate; share: the caller drops the
// result, which the live watchers then share (updateOwned); readOnly:
// tryUpdate gets the recent write itself, not a copy, and does not change
// it (GuaranteedUpdateReadOnly).
func (b *Bolt) guaranteedUpdate(ctx context.Context, kind *api.Kind, namespace, name string, tryUpdate func(cur api.Object) (api.Object, error), share, readOnly bool) (api.Object, error) {
	fresh := false // whether the next try reads the store
	for {
		cur, mayBe, err := b.startOf(ctx, kind, namespace, name, !fresh, readOnly)
		if err != nil {
			return nil, err
		}
		current := cur == nil // read from the store below, not the recent write
		fresh = true
		if current {
			var raw []byte
			if cur, raw, err = b.get(ctx, kind, namespace, name, false); err != nil {
				return nil, err
			}
			mayBe = func(enc []byte) bool { return bytes.Equal(enc, raw) }
		}
		rv := cur.GetObjectMeta().ResourceVersion
		next, err := tryUpdate(cur)
		if err == nil && readOnly && !current && next == cur {
			next = api.Clone(cur) // set below, and maybe the caller's: never the shared recent write
		}
		if err == nil {
			err = CheckTryUpdate(kind, namespace, name, next)
		}
		if err != nil {
			if !current {
				continue // maybe the recent object's error only: try the store's
			}
			return nil, err
		}
		*next.GetTypeMeta() = api.TypeMeta{APIVersion: kind.APIVersion(), Kind: kind.Kind}
		next.GetObjectMeta().ResourceVersion = rv
		enc, err := api.Encode(next)
		if err == nil && mayBe(enc) {
			if !current {
				continue // maybe a no-op on the recent object: see on the store's
			}
			return next, nil // no-op: no write, no new revision
		}
		var out api.Object
		if err == nil {
			out, err = b.updateOwned(ctx, kind, next, enc, share)
		} else {
			out, err = b.Update(ctx, next) // reports the encoding error
		}
		if api.IsConflict(err) {
			continue
		}
		return out, err
	}
}

// startOf returns, when useRecent and recent (recent.go) holds the
// object's last write, a private copy of it (shared: the object itself,
// read-only) and recentWrites.get's check of its JSON; a nil object when
// the caller must read the store.
func (b *Bolt) startOf(ctx context.Context, kind *api.Kind, namespace, name string, useRecent, shared bool) (api.Object, func([]byte) bool, error) {
	if !useRecent {
		return nil, nil, nil
	}
	if err := b.checkRead(ctx); err != nil {
		return nil, nil, err
	}
	obj, mayBe, ok := b.recent.get(bucketKey(kind.GroupResource(), api.Key(namespace, name)), shared)
	if !ok {
		return nil, nil, nil
	}
	b.stats.recentStarts.Add(1)
	return obj, mayBe, nil
}

// updateOwned is Update of next, an object that GuaranteedUpdate made from
// its own fresh copy of the stored one (tryUpdate's result), with its type
// set, and enc, its JSON. The store writes next itself instead of a private
// copy (Update's api.Clone, an encode and a decode), and the committer
// writes enc with the new resourceVersion in place instead of encoding next
// again: a decode and an encode less on every update through
// GuaranteedUpdate (bindings, status writes, heartbeats). The committer sets
// only next's resourceVersion, and its uid and creationTimestamp when
// empty; updateOwned waits for the commit whatever ctx says, so the
// committer is done with next when updateOwned returns. share: the caller
// drops next, and the live watchers get it instead of a copy (liveCopy).
func (b *Bolt) updateOwned(ctx context.Context, kind *api.Kind, next api.Object, enc []byte, share bool) (api.Object, error) {
	m := next.GetObjectMeta()
	o := &op{typ: opUpdate, kind: kind, namespace: m.Namespace, name: m.Name, obj: next, wantRV: m.ResourceVersion, enc: enc, encRV: m.ResourceVersion}
	b.liveCopy(o, share)
	if err := b.doAll(ctx, o); err != nil {
		return nil, err
	}
	return o.obj, nil
}

// prepare finds obj's kind and returns a private copy with its type meta set.
func prepare(obj api.Object) (*api.Kind, api.Object, error) {
	if obj == nil {
		return nil, nil, api.NewBadRequest("nil object")
	}
	cp := api.Clone(obj)
	k, err := prepareOwned(cp)
	if err != nil {
		return nil, nil, err
	}
	return k, cp, nil
}

// prepareOwned is prepare of an object the store may change (not copied).
func prepareOwned(obj api.Object) (*api.Kind, error) {
	if obj == nil {
		return nil, api.NewBadRequest("nil object")
	}
	k, err := api.KindOf(obj)
	if err != nil {
		return nil, api.NewBadRequest(err.Error())
	}
	*obj.GetTypeMeta() = api.TypeMeta{APIVersion: k.APIVersion(), Kind: k.Kind}
	if obj.GetObjectMeta().Name == "" {
		return nil, api.NewBadRequest(fmt.Sprintf("%s: name is required", k.GroupResource()))
	}
	return k, nil
}

// checkRead is what every read and watch checks first: ctx's error, or
// ErrClosed once the store is closed.
func (b *Bolt) checkRead(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.checkOpen()
}

func (b *Bolt) checkOpen() error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return ErrClosed
	}
	return nil
}

// decode turns stored JSON into a fresh object of kind k.
func decode(k *api.Kind, raw []byte) (api.Object, error) {
	obj, err := api.DecodeStored(k, raw)
	if err != nil {
		return nil, api.NewInternal(fmt.Errorf("decode stored %s: %w", k.GroupResource(), err))
	}
	return obj, nil
}

func readRevision(meta *bolt.Bucket) (int64, error) {
	v := meta.Get(revisionKey)
	if v == nil {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("corrupt revision: %d bytes", len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

func parseRevision(rv string) (int64, error) {
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || n <= 0 {
		return 0, api.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q: must be a positive integer", rv))
	}
	return n, nil
}

func formatRevision(rev int64) string { return strconv.FormatInt(rev, 10) }

// newUID returns a random RFC 4122 version 4 UUID.
func newUID() string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}
