package etcdstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/store"
)

var _ store.Store = (*Store)(nil)

// Store is a store.Store on etcd. Create it with New; it owns one
// goroutine that follows the revision, one that compacts (with
// CompactInterval) and one per watcher, stopped by Close. It does not own
// the client.
type Store struct {
	cli     *clientv3.Client
	watcher clientv3.Watcher // the revision watch's, for RequestProgress
	opts    Options
	log     *slog.Logger

	ctx    context.Context // the store's life: Close cancels it
	cancel context.CancelFunc
	done   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once

	mu     sync.Mutex
	rev    int64         // newest revision seen
	wake   chan struct{} // closed when rev advances or the store closes; made on demand
	closed bool

	leaseMu  sync.Mutex
	lease    clientv3.LeaseID // the Events' current lease, 0 for none
	leaseEnd time.Time        // when it ends, at the latest
}

// New returns a store on the etcd cli talks to. It reads the current
// revision (so etcd must answer within ctx) and starts following it.
func New(ctx context.Context, cli *clientv3.Client, opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("etcd store: %w", err)
	}
	opts = opts.withDefaults()
	resp, err := cli.Get(ctx, opts.Prefix, clientv3.WithCountOnly())
	if err != nil {
		return nil, fmt.Errorf("etcd store: read the revision: %w", err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	s := &Store{
		cli:     cli,
		watcher: clientv3.NewWatcher(cli),
		opts:    opts,
		log:     opts.Logger.With("component", "store", "backend", "etcd"),
		ctx:     sctx,
		cancel:  cancel,
		done:    make(chan struct{}),
		rev:     resp.Header.Revision,
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.followRevision(resp.Header.Revision)
	}()
	if opts.CompactInterval > 0 {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.compactor(opts.CompactInterval)
		}()
	}
	return s, nil
}

// Close stops the watchers and the revision watch. It leaves the client
// open. Safe twice.
func (s *Store) Close() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		if s.wake != nil {
			close(s.wake)
			s.wake = nil
		}
		s.mu.Unlock()
		s.cancel()
		close(s.done)
		_ = s.watcher.Close()
		s.wg.Wait()
	})
	return nil
}

func (s *Store) checkOpen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	return nil
}

// Revision is the newest revision the store has seen.
func (s *Store) Revision() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

// observe records a revision seen in a reply and wakes waiters.
func (s *Store) observe(h interface{ GetRevision() int64 }) {
	rev := h.GetRevision()
	s.mu.Lock()
	defer s.mu.Unlock()
	if rev > s.rev {
		s.rev = rev
		if s.wake != nil {
			close(s.wake)
			s.wake = nil
		}
	}
}

// followRevision watches the whole prefix so that Revision advances with
// every change, this store's or another server's, until Close.
func (s *Store) followRevision(rev int64) {
	for {
		wch := s.watcher.Watch(s.ctx, s.opts.Prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithProgressNotify())
		for resp := range wch {
			if resp.CompactRevision != 0 {
				rev = resp.CompactRevision // skip what was compacted: only the revision matters here
				break
			}
			if err := resp.Err(); err != nil {
				s.log.Warn("revision watch ended", "err", err)
				break
			}
			s.observe(resp.Header)
			rev = max(rev, resp.Header.Revision)
		}
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(time.Second): // back off before watching again
		}
	}
}

// WaitForRevision blocks until the store has seen revision rev, ctx ends
// or the store closes.
func (s *Store) WaitForRevision(ctx context.Context, rev int64) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if s.Revision() >= rev {
		return nil
	}
	// A linearizable read answers with the cluster's revision: rev may have
	// been reached by another server.
	resp, err := s.cli.Get(ctx, s.opts.Prefix, clientv3.WithCountOnly())
	if err != nil {
		return s.fail(ctx, "wait for revision", err)
	}
	s.observe(resp.Header)
	progressAsked := false
	for {
		s.mu.Lock()
		switch {
		case s.rev >= rev:
			s.mu.Unlock()
			return nil
		case s.closed:
			s.mu.Unlock()
			return store.ErrClosed
		}
		if s.wake == nil {
			s.wake = make(chan struct{})
		}
		wake := s.wake
		s.mu.Unlock()
		if !progressAsked {
			// Changes outside the prefix advance the revision too; the
			// revision watch reports them when asked.
			_ = s.watcher.RequestProgress(ctx)
			progressAsked = true
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// fail turns an etcd error into the store's: ctx's error when ctx ended,
// ErrClosed after Close, Internal otherwise.
func (s *Store) fail(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", op, err)
	}
	if s.checkOpen() != nil {
		return store.ErrClosed
	}
	var se *api.StatusError
	if errors.As(err, &se) {
		return err
	}
	return api.NewInternal(fmt.Errorf("%s: %w", op, err))
}

// key is the object's key.
func (s *Store) key(k *api.Kind, namespace, name string) string {
	if k.Namespaced {
		return s.opts.Prefix + k.GroupResource() + "/" + namespace + "/" + name
	}
	return s.opts.Prefix + k.GroupResource() + "/" + name
}

// rangePrefix is the prefix of a kind's keys in namespace ("" all).
func (s *Store) rangePrefix(k *api.Kind, namespace string) string {
	if k.Namespaced && namespace != "" {
		return s.opts.Prefix + k.GroupResource() + "/" + namespace + "/"
	}
	return s.opts.Prefix + k.GroupResource() + "/"
}

// decode returns the object a key holds, its resourceVersion rev.
func decode(k *api.Kind, value []byte, rev int64) (api.Object, error) {
	obj, err := store.Decode(k, value)
	if err != nil {
		return nil, err
	}
	obj.GetObjectMeta().ResourceVersion = store.FormatRevision(rev)
	return obj, nil
}

// encode is an object's stored JSON: everything but its resourceVersion,
// which is its key's mod revision.
func encode(obj api.Object) (string, error) {
	m := obj.GetObjectMeta()
	rv := m.ResourceVersion
	m.ResourceVersion = ""
	raw, err := api.Encode(obj)
	m.ResourceVersion = rv
	if err != nil {
		return "", api.NewInternal(fmt.Errorf("encode %s: %w", api.KeyOf(obj), err))
	}
	return string(raw), nil
}

func isEvent(k *api.Kind) bool { return k.Group == "" && k.Kind == "Event" }

// Create stores a new object, setting uid and creationTimestamp when empty.
func (s *Store) Create(ctx context.Context, obj api.Object) (api.Object, error) {
	k, cp, err := store.Prepare(obj)
	if err != nil {
		return nil, err
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	m := cp.GetObjectMeta()
	if m.UID == "" {
		m.UID = store.NewUID()
	}
	if m.CreationTimestamp.IsZero() {
		m.CreationTimestamp = api.NewTime(s.opts.Now().Truncate(time.Second))
	}
	m.ResourceVersion = ""
	value, err := encode(cp)
	if err != nil {
		return nil, err
	}
	key := s.key(k, m.Namespace, m.Name)
	resp, err := s.put(ctx, k, key, value, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
	if err != nil {
		return nil, s.fail(ctx, "create "+key, err)
	}
	if !resp.Succeeded {
		return nil, api.NewAlreadyExists(k, m.Name)
	}
	m.ResourceVersion = store.FormatRevision(resp.Header.Revision)
	return cp, nil
}

// put writes value at key if cmp holds, else reads key; an Event's key
// gets the Events' lease.
func (s *Store) put(ctx context.Context, k *api.Kind, key, value string, cmp clientv3.Cmp) (*clientv3.TxnResponse, error) {
	for attempt := 0; ; attempt++ {
		var opts []clientv3.OpOption
		var lease clientv3.LeaseID
		if isEvent(k) {
			var err error
			if lease, err = s.eventLease(ctx); err != nil {
				return nil, err
			}
			opts = append(opts, clientv3.WithLease(lease))
		}
		resp, err := s.cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(key, value, opts...)).Else(clientv3.OpGet(key)).Commit()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt == 0 {
			s.forgetLease(lease) // revoked or expired early: grant another
			continue
		}
		if err != nil {
			return nil, err
		}
		s.observe(resp.Header)
		return resp, nil
	}
}

// eventLease returns a lease that ends no sooner than EventTTL from now:
// the current one while it lasts that long, else a new one of 1.05
// EventTTL, so that a burst of Events shares one lease.
func (s *Store) eventLease(ctx context.Context) (clientv3.LeaseID, error) {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	ttl := s.opts.EventTTL
	now := time.Now() // etcd's leases run on real time
	if s.lease != 0 && !now.Add(ttl).After(s.leaseEnd) {
		return s.lease, nil
	}
	secs := int64(math.Ceil((ttl + ttl/20).Seconds()))
	resp, err := s.cli.Grant(ctx, secs)
	if err != nil {
		return 0, fmt.Errorf("grant an event lease: %w", err)
	}
	s.lease, s.leaseEnd = resp.ID, now.Add(time.Duration(resp.TTL)*time.Second)
	return s.lease, nil
}

func (s *Store) forgetLease(id clientv3.LeaseID) {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	if s.lease == id {
		s.lease = 0
	}
}

// getKV reads one key: nil when it is absent.
func (s *Store) getKV(ctx context.Context, key string) (*mvccpb.KeyValue, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return nil, s.fail(ctx, "get "+key, err)
	}
	s.observe(resp.Header)
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	return resp.Kvs[0], nil
}

// elseKV is the key read by a failed put's or delete's Else branch.
func elseKV(resp *clientv3.TxnResponse) *mvccpb.KeyValue {
	if len(resp.Responses) == 0 {
		return nil
	}
	if r := resp.Responses[0].GetResponseRange(); r != nil && len(r.Kvs) > 0 {
		return r.Kvs[0]
	}
	return nil
}

// Get returns one object or NotFound.
func (s *Store) Get(ctx context.Context, kind *api.Kind, namespace, name string) (api.Object, error) {
	kv, err := s.getKV(ctx, s.key(kind, namespace, name))
	if err != nil {
		return nil, err
	}
	if kv == nil {
		return nil, api.NewNotFound(kind, name)
	}
	return decode(kind, kv.Value, kv.ModRevision)
}

// Update replaces an existing object. A non-empty resourceVersion must be
// the stored one and a non-empty uid the stored one; empty uid and
// creationTimestamp are kept from the stored object. Without a
// resourceVersion it retries until its write lands on the version it read.
func (s *Store) Update(ctx context.Context, obj api.Object) (api.Object, error) {
	k, cp, err := store.Prepare(obj)
	if err != nil {
		return nil, err
	}
	m := cp.GetObjectMeta()
	want := m.ResourceVersion
	if want != "" {
		if _, err := store.ParseRevision(want); err != nil {
			return nil, err
		}
	}
	uid, created := m.UID, m.CreationTimestamp
	key := s.key(k, m.Namespace, m.Name)
	cur, err := s.getKV(ctx, key)
	if err != nil {
		return nil, err
	}
	for {
		if cur == nil {
			return nil, api.NewNotFound(k, m.Name)
		}
		if want != "" && want != store.FormatRevision(cur.ModRevision) {
			return nil, store.ErrModified(k, m.Name)
		}
		old, err := decode(k, cur.Value, cur.ModRevision)
		if err != nil {
			return nil, err
		}
		om := old.GetObjectMeta()
		if uid != "" && uid != om.UID {
			return nil, store.ErrUIDPrecondition(k, m.Name, uid, om.UID)
		}
		m.UID, m.CreationTimestamp = uid, created
		if m.UID == "" {
			m.UID = om.UID
		}
		if m.CreationTimestamp.IsZero() {
			m.CreationTimestamp = om.CreationTimestamp
		}
		out, next, err := s.write(ctx, k, key, cp, cur)
		if err != nil || out != nil {
			return out, err
		}
		cur = next
	}
}

// write puts obj at key if the key is still at cur's mod revision. It
// returns obj with its new resourceVersion, or, when the key changed, its
// current state (nil when deleted) to try again with.
func (s *Store) write(ctx context.Context, k *api.Kind, key string, obj api.Object, cur *mvccpb.KeyValue) (api.Object, *mvccpb.KeyValue, error) {
	value, err := encode(obj)
	if err != nil {
		return nil, nil, err
	}
	resp, err := s.put(ctx, k, key, value, clientv3.Compare(clientv3.ModRevision(key), "=", cur.ModRevision))
	if err != nil {
		return nil, nil, s.fail(ctx, "update "+key, err)
	}
	if !resp.Succeeded {
		return nil, elseKV(resp), nil
	}
	*obj.GetTypeMeta() = api.TypeMeta{APIVersion: k.APIVersion(), Kind: k.Kind}
	obj.GetObjectMeta().ResourceVersion = store.FormatRevision(resp.Header.Revision)
	return obj, nil, nil
}

// GuaranteedUpdate reads the object, applies tryUpdate to a copy and writes
// the result on the version read, reading again and retrying when another
// write came first. A result equal to the stored object is not written.
func (s *Store) GuaranteedUpdate(ctx context.Context, kind *api.Kind, namespace, name string, tryUpdate func(cur api.Object) (api.Object, error)) (api.Object, error) {
	key := s.key(kind, namespace, name)
	cur, err := s.getKV(ctx, key)
	if err != nil {
		return nil, err
	}
	for {
		if cur == nil {
			return nil, api.NewNotFound(kind, name)
		}
		obj, err := decode(kind, cur.Value, cur.ModRevision)
		if err != nil {
			return nil, err
		}
		om := obj.GetObjectMeta()
		uid, created := om.UID, om.CreationTimestamp
		next, err := tryUpdate(obj)
		if err != nil {
			return nil, err
		}
		if err := store.CheckTryUpdate(kind, namespace, name, next); err != nil {
			return nil, err
		}
		m := next.GetObjectMeta()
		if m.UID != "" && m.UID != uid {
			return nil, store.ErrUIDPrecondition(kind, name, m.UID, uid)
		}
		if m.UID == "" {
			m.UID = uid
		}
		if m.CreationTimestamp.IsZero() {
			m.CreationTimestamp = created
		}
		*next.GetTypeMeta() = api.TypeMeta{APIVersion: kind.APIVersion(), Kind: kind.Kind}
		value, err := encode(next)
		if err != nil {
			return nil, err
		}
		if bytes.Equal([]byte(value), cur.Value) {
			m.ResourceVersion = store.FormatRevision(cur.ModRevision)
			return next, nil // no-op: no write, no new revision
		}
		out, again, err := s.write(ctx, kind, key, next, cur)
		if err != nil || out != nil {
			return out, err
		}
		cur = again
	}
}

// Delete removes an object and returns its last state, with the delete's
// revision as resourceVersion.
func (s *Store) Delete(ctx context.Context, kind *api.Kind, namespace, name string, pre *api.Preconditions) (api.Object, error) {
	key := s.key(kind, namespace, name)
	cur, err := s.getKV(ctx, key)
	if err != nil {
		return nil, err
	}
	for {
		if cur == nil {
			return nil, api.NewNotFound(kind, name)
		}
		obj, err := decode(kind, cur.Value, cur.ModRevision)
		if err != nil {
			return nil, err
		}
		m := obj.GetObjectMeta()
		if pre != nil && pre.UID != nil && *pre.UID != m.UID {
			return nil, store.ErrUIDPrecondition(kind, name, *pre.UID, m.UID)
		}
		if pre != nil && pre.ResourceVersion != nil && *pre.ResourceVersion != m.ResourceVersion {
			return nil, store.ErrResourceVersionPrecondition(kind, name, *pre.ResourceVersion, m.ResourceVersion)
		}
		resp, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", cur.ModRevision)).
			Then(clientv3.OpDelete(key)).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil {
			return nil, s.fail(ctx, "delete "+key, err)
		}
		s.observe(resp.Header)
		if resp.Succeeded {
			m.ResourceVersion = store.FormatRevision(resp.Header.Revision)
			return obj, nil
		}
		cur = elseKV(resp)
	}
}

// List returns the objects of a kind (in one namespace, or all when ""),
// sorted by key, and the revision they were read at.
func (s *Store) List(ctx context.Context, kind *api.Kind, namespace string) ([]api.Object, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	if err := s.checkOpen(); err != nil {
		return nil, 0, err
	}
	resp, err := s.cli.Get(ctx, s.rangePrefix(kind, namespace), clientv3.WithPrefix())
	if err != nil {
		return nil, 0, s.fail(ctx, "list "+kind.GroupResource(), err)
	}
	s.observe(resp.Header)
	items, err := decodeAll(kind, resp.Kvs)
	if err != nil {
		return nil, 0, err
	}
	return items, resp.Header.Revision, nil
}

func decodeAll(kind *api.Kind, kvs []*mvccpb.KeyValue) ([]api.Object, error) {
	var out []api.Object
	for _, kv := range kvs {
		obj, err := decode(kind, kv.Value, kv.ModRevision)
		if err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
	return out, nil
}

// ListExact returns the objects of a kind as they were at revision rev,
// from etcd's history: Gone when rev was compacted, Timeout
// ResourceVersionTooLarge when etcd has not reached it.
func (s *Store) ListExact(ctx context.Context, kind *api.Kind, namespace string, rev int64) ([]api.Object, error) {
	if rev <= 0 {
		return nil, store.ErrBadListRevision(rev)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	resp, err := s.cli.Get(ctx, s.rangePrefix(kind, namespace), clientv3.WithPrefix(), clientv3.WithRev(rev))
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return nil, store.ErrListTooOld()
	case errors.Is(err, rpctypes.ErrFutureRev):
		return nil, api.NewTooLargeResourceVersion(rev, s.Revision(), 0)
	case err != nil:
		return nil, s.fail(ctx, "list "+kind.GroupResource(), err)
	}
	s.observe(resp.Header)
	return decodeAll(kind, resp.Kvs)
}
