package controllers

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"strconv"
	"sync"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/quota"
)

// The resourcequota controller keeps each ResourceQuota's status true, as
// kube-controller-manager's: status.hard is spec.hard, status.used what
// the namespace's objects use (controlplane/quota: Calculate), every hard
// resource listed (0 when unused), so admission can judge the next create
// (it refuses while a quota has no usage yet: "status unknown for
// quota"). One reconcile of a quota key (namespace/name):
//
//  1. Read the quota from the API server (not the cache: its
//     resourceVersion and the charges admission reserved on it are what
//     the write below must not lose).
//  2. Take the objects of every kind a hard resource counts, in the
//     quota's namespace: from the controllers' caches where there is one,
//     else listed from the API server. When that count is below a stored
//     usage, a cache may lag behind an object whose charge admission has
//     settled (dropped its reservation once the object was stored, always
//     in a quota write after the object's): count again once each cache
//     has reached the quota's resourceVersion, so holds every such object,
//     and from a fresh list the kinds whose caches do not get there within
//     cacheWait (a kind with no change since the quota's last write).
//  3. Count them, add admission's reservations for objects the count does
//     not see yet, drop the ones it does, and write status (and the
//     reservations) with the quota's resourceVersion when anything
//     changed. A write that lost to admission is a Conflict: the loop
//     tries again from the new quota.
//
// It reconciles when a quota comes, goes or changes its spec (not on the
// status writes of admission: QuotaHandler), when an object a quota counts goes
// or changes what it uses (pods ending free their share at once), a
// moment after one comes (addRecount), and every resync (the kinds
// without a cache, and reservations that expired).
type ResourceQuotaController struct {
	client client.Interface
	quotas Lister // *api.ResourceQuota
	// caches of the kinds the controllers keep, by kind name ("Pod").
	caches map[string]Lister
	log    *slog.Logger
	now    func() time.Time
	// seen remembers, for ReservationTTL, the objects (resource/uid) it
	// has counted and their generation, so the reservation of an object
	// counted and deleted since is not counted again.
	mu    sync.Mutex
	seen  map[quota.ObjectID]seenObject
	swept time.Time // when seen last lost its old entries
	// usages keeps each object's usage between counts (a count sums the
	// whole namespace, and runs whenever one object changes).
	usages quota.UsageCache
	// costs are, by namespace, how long its last count took
	// (recountAfterAdd). Under mu.
	costs map[string]time.Duration
	// reached is, by kind name, the resourceVersion of the last change
	// the handlers saw of that kind: its cache holds every change up to
	// it (an informer updates its cache before it calls the handlers, in
	// the order of the changes). moved, when a count waits, is closed
	// when one moves.
	rvMu    sync.Mutex
	reached map[string]uint64
	moved   chan struct{}
}

// cacheWait bounds how long a count waits for a cache to reach a quota's
// resourceVersion before it lists that kind from the API server instead.
const cacheWait = time.Second

type seenObject struct {
	gen int64
	at  time.Time
}

const resourceQuotaControllerName = "resourcequota-controller"

// NewResourceQuotaController returns the controller; quotas is a cache of
// every ResourceQuota, caches the controllers' other caches by kind name.
func NewResourceQuotaController(c client.Interface, quotas Lister, caches map[string]Lister, log *slog.Logger) *ResourceQuotaController {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &ResourceQuotaController{client: c, quotas: quotas, caches: caches, log: log.With("controller", resourceQuotaControllerName),
		now: time.Now, seen: map[quota.ObjectID]seenObject{}, costs: map[string]time.Duration{}, reached: map[string]uint64{}}
}

// advance records that the cache of k holds every change up to o's.
func (rc *ResourceQuotaController) advance(k *api.Kind, o api.Object) {
	rv, err := strconv.ParseUint(o.GetObjectMeta().ResourceVersion, 10, 64)
	if err != nil {
		return
	}
	rc.rvMu.Lock()
	defer rc.rvMu.Unlock()
	if rv > rc.reached[k.Kind] {
		rc.reached[k.Kind] = rv
		if rc.moved != nil {
			close(rc.moved)
			rc.moved = nil
		}
	}
}

// waitReached waits until the cache of kind has reached resourceVersion
// rv, or until deadline; it reports whether it did.
func (rc *ResourceQuotaController) waitReached(ctx context.Context, kind string, rv uint64, deadline <-chan time.Time) bool {
	for {
		rc.rvMu.Lock()
		if rc.reached[kind] >= rv {
			rc.rvMu.Unlock()
			return true
		}
		if rc.moved == nil {
			rc.moved = make(chan struct{})
		}
		moved := rc.moved
		rc.rvMu.Unlock()
		select {
		case <-moved:
		case <-deadline:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// behind returns the kinds of q whose caches have not reached q's
// resourceVersion within cacheWait (all of them when it is unreadable).
func (rc *ResourceQuotaController) behind(ctx context.Context, q *api.ResourceQuota) map[string]bool {
	out := map[string]bool{}
	rv, err := strconv.ParseUint(q.ResourceVersion, 10, 64)
	timer := time.NewTimer(cacheWait)
	defer timer.Stop()
	for _, k := range quota.KindsFor(q.Spec.Hard, api.Kinds) {
		if rc.caches[k.Kind] != nil && (err != nil || !rc.waitReached(ctx, k.Kind, rv, timer.C)) {
			out[k.Kind] = true
		}
	}
	return out
}

// see records objects of kind k as counted now.
func (rc *ResourceQuotaController) see(k *api.Kind, objs ...api.Object) {
	now := rc.now()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, o := range objs {
		m := o.GetObjectMeta()
		key := quota.ObjectID{Resource: k.GroupResource(), UID: m.UID}
		if s, ok := rc.seen[key]; !ok || s.gen <= m.Generation {
			rc.seen[key] = seenObject{gen: m.Generation, at: now}
		}
	}
	if now.Sub(rc.swept) < quota.ReservationTTL/4 {
		return
	}
	rc.swept = now
	for key, s := range rc.seen {
		if now.Sub(s.at) > quota.ReservationTTL {
			delete(rc.seen, key)
		}
	}
}

// seenBefore is quota.Seen over what see recorded.
func (rc *ResourceQuotaController) seenBefore(resource, uid string, gen int64) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	s, ok := rc.seen[quota.ObjectID{Resource: resource, UID: uid}]
	return ok && s.gen >= gen
}

// Reconcile recounts the quota key. It implements client.Reconciler.
func (rc *ResourceQuotaController) Reconcile(ctx context.Context, key string) error {
	ns, name := splitKey(key)
	q, err := client.Get[*api.ResourceQuota](ctx, rc.client, ns, name)
	if api.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("resource quota %s: %w", key, err)
	}
	st, keep, err := rc.count(ctx, q, nil)
	if err == nil && quota.Lower(q.Status.Used, st.Used) {
		// Admission settles a charge once its object is stored, maybe
		// before the cache has it: lower a usage only on a count of
		// caches that have reached the quota, or of fresh lists.
		st, keep, err = rc.count(ctx, q, rc.behind(ctx, q))
	}
	if err != nil {
		return fmt.Errorf("resource quota %s: %w", key, err)
	}
	next := api.Clone(q)
	if !quota.Apply(next, st, keep) {
		logReconcile(rc.log, false, key, quota.PrettyPrint(q.Status.Used), "the same", "none")
		return nil
	}
	if _, err := rc.client.UpdateStatus(ctx, next); err != nil {
		if api.IsConflict(err) {
			return client.RequeueAfter(conflictRetry)
		}
		return fmt.Errorf("resource quota %s: update status: %w", key, err)
	}
	logReconcile(rc.log, true, key, quota.PrettyPrint(q.Status.Used), quota.PrettyPrint(st.Used), fmt.Sprintf("status written (%d charges in flight)", len(keep)))
	return nil
}

// count calculates q's status from the caches (where there are caches,
// and the kind is not in fresh) or fresh lists.
func (rc *ResourceQuotaController) count(ctx context.Context, q *api.ResourceQuota, fresh map[string]bool) (api.ResourceQuotaStatus, []quota.Reservation, error) {
	start := rc.now()
	defer func() {
		rc.mu.Lock()
		rc.costs[q.Namespace] = rc.now().Sub(start)
		rc.mu.Unlock()
	}()
	var objs []quota.Objects
	for _, k := range quota.KindsFor(q.Spec.Hard, api.Kinds) {
		var items []api.Object
		if cache := rc.caches[k.Kind]; cache != nil && !fresh[k.Kind] {
			items = cache.ListBy(nil, q.Namespace)
		} else {
			var err error
			if items, _, err = rc.client.List(ctx, k, q.Namespace, api.ListOptions{}); err != nil {
				return api.ResourceQuotaStatus{}, nil, fmt.Errorf("list %s: %w", k.Resource, err)
			}
		}
		objs = append(objs, quota.Objects{Kind: k, Items: items,
			Usage: func(o api.Object, now time.Time) api.ResourceList { return rc.usages.Usage(k, o, now) }})
		rc.see(k, items...)
	}
	st, keep := quota.Calculate(q, objs, rc.now(), rc.seenBefore)
	return st, keep, nil
}

// QuotaHandler enqueues a quota when it comes or goes, when its spec
// changes, and when its status does not answer its spec (hard limits that
// differ, a hard resource without usage), as kube-controller-manager's:
// not on the status and reservation writes of admission, which change no
// count (a count of the namespace on each of them would cost one count
// per create). The resync counts every quota anyway.
func (rc *ResourceQuotaController) QuotaHandler(q Queue) client.Handler {
	enqueue := func(o api.Object) { q.Enqueue(api.KeyOf(o)) }
	return client.Handler{
		OnAdd: enqueue,
		OnUpdate: func(old, o api.Object) {
			prev, cur := old.(*api.ResourceQuota), o.(*api.ResourceQuota)
			if !quota.Equal(prev.Spec.Hard, cur.Spec.Hard) || !reflect.DeepEqual(prev.Spec.Scopes, cur.Spec.Scopes) ||
				!reflect.DeepEqual(prev.Spec.ScopeSelector, cur.Spec.ScopeSelector) || !statusAnswers(cur) {
				enqueue(o)
			}
		},
		OnDelete: enqueue,
	}
}

// statusAnswers reports whether q's status has its spec's hard limits and
// a usage for each.
func statusAnswers(q *api.ResourceQuota) bool {
	if !quota.Equal(q.Spec.Hard, q.Status.Hard) {
		return false
	}
	for name := range q.Spec.Hard {
		if _, ok := q.Status.Used[name]; !ok {
			return false
		}
	}
	return true
}

// Queue is where QuotaHandler and ObjectHandler put quota keys (a *client.Loop).
type Queue interface {
	Enqueue(key string)
	EnqueueAfter(key string, d time.Duration)
}

// addRecount is how long after an object's add its namespace's quotas are
// counted again, at least. Admission charged the object before it was
// stored, so its add changes no usage (the count swaps its charge for the
// object); the recount is only a net for an object stored uncharged (its
// namespace had no quota yet when it was admitted). Waiting lets a burst
// of creates share one count of the namespace instead of one each.
const addRecount = time.Second

// recountDuty bounds what that net costs: a count that took d waits
// recountDuty×d (at most maxAddRecount) after an add, so a burst of
// creates into a namespace of thousands of objects spends at most 1 % of
// a core recounting them (the count sums the whole namespace: about a ms
// per thousand pods). A change that frees usage is counted at once.
const (
	recountDuty   = 100
	maxAddRecount = 30 * time.Second
)

// recountAfterAdd is how long after an object's add in ns its quotas are
// counted again (addRecount, recountDuty).
func (rc *ResourceQuotaController) recountAfterAdd(ns string) time.Duration {
	rc.mu.Lock()
	cost := rc.costs[ns]
	rc.mu.Unlock()
	return min(max(addRecount, recountDuty*cost), maxAddRecount)
}

// ObjectHandler enqueues the quotas of an object's namespace when the
// object goes or changes what a quota counts of it, and recountAfterAdd
// after it comes.
func (rc *ResourceQuotaController) ObjectHandler(k *api.Kind, q Queue) client.Handler {
	enqueue := func(quotas []api.Object, after time.Duration) {
		for _, qo := range quotas {
			q.EnqueueAfter(api.KeyOf(qo), after)
		}
	}
	quotasOf := func(o api.Object) []api.Object { return rc.quotas.ListBy(nil, o.GetObjectMeta().Namespace) }
	return client.Handler{
		OnAdd: func(o api.Object) {
			rc.advance(k, o)
			enqueue(quotasOf(o), rc.recountAfterAdd(o.GetObjectMeta().Namespace))
		},
		OnUpdate: func(old, o api.Object) {
			rc.advance(k, o)
			// Most namespaces have no quota: their updates (a pod's bind,
			// each status) are not compared at all.
			if quotas := quotasOf(o); len(quotas) > 0 && quota.UsageChanged(k, o, old, rc.now()) {
				enqueue(quotas, 0)
			}
		},
		OnDelete: func(o api.Object) {
			rc.advance(k, o)
			rc.see(k, o) // it lived: its reservation is settled
			enqueue(quotasOf(o), 0)
		},
	}
}

// addResourceQuota wires the resourcequota controller to the quota cache
// and to every other cache of the manager.
func (m *Manager) addResourceQuota(c client.Interface, newLoop func(string, client.Reconciler, func() []string) *client.Loop, log *slog.Logger) {
	caches := map[string]Lister{}
	counted := map[string]*client.Informer{}
	for _, inf := range m.informers {
		k := inf.Kind()
		if k.Namespaced && caches[k.Kind] == nil {
			caches[k.Kind] = inf
			counted[k.Kind] = inf
		}
	}
	quotas := m.informer(c, api.MustKindOf(&api.ResourceQuota{}), log)
	rc := NewResourceQuotaController(c, quotas, caches, log)
	loop := newLoop(resourceQuotaControllerName, rc, quotas.Keys)
	quotas.AddHandler(rc.QuotaHandler(loop))
	for _, inf := range counted {
		inf.AddHandler(rc.ObjectHandler(inf.Kind(), loop))
	}
}
