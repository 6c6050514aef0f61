package apiserver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/quota"
	"skiff.dev/skiff/controlplane/store"
)

// ResourceQuota admission, as Kubernetes' (k8s.io/apiserver's
// resourcequota plugin), the last step before a write is stored:
//
//   - A create (or an update that uses more: a service turned NodePort)
//     in a namespace with ResourceQuotas is checked against each quota
//     that covers it (quota.Check) and refused, 403, in Kubernetes' words:
//     `pods "cuda-2" is forbidden: exceeded quota: gpus, requested:
//     requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=1,
//     limited: requests.nvidia.com/gpu=1`.
//   - Otherwise its usage is added to those quotas' status.used, with a
//     reservation (quota.Charge), before the object is stored; a write that
//     then fails takes the charge back (quota.Release). A dry run is
//     checked and charges nothing.
//   - Requests of one namespace are served by one goroutine at a time, in
//     batches (Kubernetes' per-namespace evaluator queue): every request
//     waiting is checked against the quotas in turn, then each quota that
//     changed is written once, with its resourceVersion. Two creates racing
//     for the last GPU are checked one after the other: the second sees
//     the first's charge.
//   - A create does not wait for its charge's commit: where the store can
//     (store.Chainer) the batch's quota writes are queued, the creates are
//     answered, and each create is stored only if its charges were
//     (CreateEncodedAfter): the charge and the create share a commit, one
//     fsync, instead of following each other. Other writes wait for the
//     charge (chargeQuotaWritten). A charge whose quota write lost a race
//     (the resourcequota controller, another API server) fails its write,
//     which is checked and charged again from the stored quota
//     (quotaRetries times).
//   - Between batches the namespace's quotas are a list kept with the
//     batches' own writes in place (sharedlist.go), read again only when
//     someone else wrote one; and each quota's reservations as parsed.
var quotaKind = api.MustKindOf(&api.ResourceQuota{})

// quotaRetries bounds the charges of one write whose quota writes lost
// races (to the controller, which writes when usage went down, or to
// another API server): each is checked again on the stored quotas.
const quotaRetries = 10

// quotaAdmission holds the per-namespace queues.
type quotaAdmission struct {
	mu     sync.Mutex
	queues map[string][]*quotaWaiter // waiting requests by namespace; present while a worker runs
	// stored are, by namespace, the objects ("resource/uid") whose charged
	// writes are stored: the next quota write of the namespace drops their
	// reservations (quota.Settle).
	stored map[string]map[string]bool
	// memos are, by namespace, its quotas' reservations as the last batch
	// that wrote each left them (quotaMemo); only the namespace's worker
	// reads or changes its map.
	memos map[string]map[string]quotaMemo
}

// quotaWaiter is one request in a namespace's queue.
type quotaWaiter struct {
	req     quota.Request
	dryRun  bool
	release bool // take back the charges of (resource, uid) instead
	done    chan error
	// charged are the quotas this request was charged to, and after their
	// writes, queued (store.Queued): the request's write may ride in their
	// commit, or wait for them.
	charged []string
	after   []*store.Queued
}

// chargeQuota runs quota admission for a write of obj (old: its stored
// state, nil on create). It returns what to call once the write is done
// (stored: it succeeded): it settles the charge, or takes it back; and the
// quota writes of the charge, queued: the write must not be stored unless
// they are made (store.CreateEncodedAfter, or chargeQuotaWritten). A
// refusal is a 403 in Kubernetes' words.
func (r *Registry) chargeQuota(ctx context.Context, k *api.Kind, obj, old api.Object) (func(ctx context.Context, stored bool), []*store.Queued, error) {
	nothing := func(context.Context, bool) {}
	if !k.Namespaced || k == quotaKind && old != nil || old != nil && !quota.UsageChanged(k, obj, old, time.Now()) {
		return nothing, nil, nil
	}
	m := obj.GetObjectMeta()
	if n, err := r.countQuotas(ctx, m.Namespace); err == nil && n == 0 {
		return nothing, nil, nil // the common case: no quota here, no queue
	}
	release := func() { r.releaseQuota(m.Namespace, k, obj) }
	w := &quotaWaiter{req: quota.Request{Kind: k, Obj: obj, Old: old, Now: time.Now()}, dryRun: isDryRun(ctx), done: make(chan error, 1)}
	r.enqueueQuota(m.Namespace, w)
	var err error
	select {
	case err = <-w.done:
	case <-ctx.Done():
		go func() { // the charge may still land: take it back then
			if <-w.done == nil && len(w.charged) > 0 {
				release()
			}
		}()
		return nil, nil, ctx.Err()
	}
	if err != nil {
		if errors.Is(err, quota.ErrForbidden) {
			return nil, nil, forbidden(k, m.Name, err.Error())
		}
		return nil, nil, err
	}
	if len(w.charged) == 0 {
		return nothing, nil, nil
	}
	return func(_ context.Context, stored bool) {
		if !stored {
			release()
			return
		}
		r.quotas.mu.Lock()
		r.quotas.storedLocked(m.Namespace)[k.GroupResource()+"/"+m.UID] = true
		r.quotas.mu.Unlock()
	}, w.after, nil
}

// storedLocked returns the namespace's set of stored objects
// ("resource/uid", quotaAdmission.stored), made when it has none. qa.mu
// is held.
func (qa *quotaAdmission) storedLocked(ns string) map[string]bool {
	if qa.stored == nil {
		qa.stored = map[string]map[string]bool{}
	}
	if qa.stored[ns] == nil {
		qa.stored[ns] = map[string]bool{}
	}
	return qa.stored[ns]
}

// chargeQuotaWritten is chargeQuota for a write that cannot ride with its
// charge (an update): it returns once the charge is written, charging
// again when a quota write lost a race.
func (r *Registry) chargeQuotaWritten(ctx context.Context, k *api.Kind, obj, old api.Object) (func(ctx context.Context, stored bool), error) {
	for attempt := 1; ; attempt++ {
		done, after, err := r.chargeQuota(ctx, k, obj, old)
		if err != nil {
			return nil, err
		}
		err = store.WaitAll(after)
		if err == nil {
			return done, nil
		}
		done(ctx, false) // what was written to the other quotas
		if !retryCharge(err, attempt) {
			return nil, quotaWriteFailed(err)
		}
	}
}

// retryCharge reports whether a write that failed with err, after its
// attempt-th charge, is charged again: when a quota write lost a race.
func retryCharge(err error, attempt int) bool {
	return errors.Is(err, store.ErrDependencyFailed) && api.IsConflict(err) && attempt < quotaRetries
}

// quotaWriteFailed is the error of a write whose charge was not written
// (err: store.ErrDependencyFailed's).
func quotaWriteFailed(err error) error {
	return fmt.Errorf("quota admission: update quota: %w", err)
}

// releaseQuota takes back the charges of (k, obj) from the namespace's
// quotas, writing each quota that held one, again when a write lost a race.
func (r *Registry) releaseQuota(ns string, k *api.Kind, obj api.Object) {
	var err error
	for range quotaRetries {
		rel := &quotaWaiter{req: quota.Request{Kind: k, Obj: obj, Now: time.Now()}, release: true, done: make(chan error, 1)}
		r.enqueueQuota(ns, rel)
		if err = <-rel.done; err == nil {
			err = store.WaitAll(rel.after)
		}
		if err == nil || !api.IsConflict(err) {
			break
		}
	}
	if err != nil {
		r.log.Warn("quota: release the charge of a failed write", "kind", k.Kind, "key", api.KeyOf(obj), "err", err)
	}
}

// countQuotas counts the namespace's quotas: the kept list's (listShared)
// while it holds, else without decoding them where the store can
// (store.Counter: a quota carries its reservations, and this is asked for
// every write). A namespace found without quotas is kept as an empty list,
// which holds until a quota is written there: the common case, asked for
// every create, then reads no transaction.
func (r *Registry) countQuotas(ctx context.Context, ns string) (int, error) {
	if quotas, _, ok := r.kept(quotaKind, ns); ok {
		return len(quotas), nil
	}
	if c, ok := r.store.(store.Counter); ok {
		wc, counted := r.store.(store.WriteCounter)
		var writes uint64
		if counted {
			writes = wc.Writes(quotaKind, ns) // before the count: a write meanwhile moves it past
		}
		n, err := c.Count(ctx, quotaKind, ns)
		if err == nil && n == 0 && counted {
			r.keep(quotaKind, ns, writes, []api.Object{})
		}
		return n, err
	}
	quotas, _, err := r.store.List(ctx, quotaKind, ns)
	return len(quotas), err
}

// enqueueQuota puts w in its namespace's queue and starts the worker when
// none runs; w.done receives the result.
func (r *Registry) enqueueQuota(ns string, w *quotaWaiter) {
	qa := &r.quotas
	qa.mu.Lock()
	if qa.queues == nil {
		qa.queues = map[string][]*quotaWaiter{}
	}
	waiting, running := qa.queues[ns]
	qa.queues[ns] = append(waiting, w)
	qa.mu.Unlock()
	if !running {
		go r.drainQuota(ns)
	}
}

// quotaMemo is a quota as the last batch that wrote it left it: its uid
// and resourceVersion, and its reservations as that batch's ledger left
// them. The next batch that finds the quota unchanged goes on from them
// (quota.NewLedgerWith) instead of reading the annotation's JSON again
// (a few dozen reservations, each with its quantities to parse).
type quotaMemo struct {
	uid, rv string
	rs      []quota.Reservation
}

// drainQuota serves a namespace's queue in batches until it is empty.
func (r *Registry) drainQuota(ns string) {
	qa := &r.quotas
	for {
		qa.mu.Lock()
		batch := qa.queues[ns]
		if len(batch) == 0 {
			delete(qa.queues, ns)
			qa.mu.Unlock()
			return
		}
		qa.queues[ns] = batch[:0:0]
		stored := qa.stored[ns]
		delete(qa.stored, ns)
		if qa.memos == nil {
			qa.memos = map[string]map[string]quotaMemo{}
		}
		memo := qa.memos[ns]
		if memo == nil {
			memo = map[string]quotaMemo{}
			qa.memos[ns] = memo
		}
		qa.mu.Unlock()
		r.quotaBatch(context.Background(), ns, batch, stored, memo)
	}
}

// quotaBatch checks and charges a batch against the namespace's quotas
// and answers every waiter, with the quota writes of its charge queued
// (quotaWaiter.after); a quota it writes drops the reservations of the
// objects stored since the last batch. It returns once those writes are
// done: the next batch writes the quotas again, from what they left. The
// namespace's quotas are a list kept between batches (listShared), with
// the batch's own writes in place; memo holds their reservations as the
// batches left them.
func (r *Registry) quotaBatch(ctx context.Context, ns string, batch []*quotaWaiter, stored map[string]bool, memo map[string]quotaMemo) {
	results := make([]error, len(batch))
	all, writes, err := r.listShared(ctx, quotaKind, ns)
	if err != nil {
		for i := range results {
			results[i] = fmt.Errorf("quota admission: list quotas: %w", err)
		}
	}
	if len(all) == 0 {
		clear(memo) // no quota left here: no reservations to keep
	}
	quotas := make([]*api.ResourceQuota, len(all))
	// Each quota's reservations are read once for the batch and written
	// once, when it changed (quota.Ledger).
	ledgers := make([]*quota.Ledger, len(all))
	for i, o := range all {
		q := o.(*api.ResourceQuota)
		quotas[i] = api.Clone(q)
		if m, ok := memo[q.Name]; ok && m.uid == q.UID && m.rv == q.ResourceVersion {
			ledgers[i] = quota.NewLedgerWith(quotas[i], slices.Clone(m.rs))
		} else {
			ledgers[i] = quota.NewLedger(quotas[i])
		}
	}
	changed := map[int][]int{} // quota index → waiters charged to it
	for i, w := range batch {
		if results[i] == nil {
			r.quotaOne(quotas, ledgers, i, w, &results[i], changed)
		}
	}
	queued := map[int]*store.Queued{}
	for j, ws := range changed {
		ledgers[j].Settle(stored)
		ledgers[j].Flush()
		q := r.updateQueued(ctx, quotas[j])
		queued[j] = q
		for _, i := range ws {
			batch[i].charged = append(batch[i].charged, quotas[j].Name)
			batch[i].after = append(batch[i].after, q)
		}
	}
	for i, w := range batch {
		w.done <- results[i]
	}
	written := map[string]api.Object{}
	for j, q := range queued {
		name := quotas[j].Name
		out, err := q.Wait()
		if err != nil {
			delete(memo, name) // read it again
			continue
		}
		om := out.GetObjectMeta()
		written[name] = out
		memo[name] = quotaMemo{uid: om.UID, rv: om.ResourceVersion, rs: ledgers[j].Reservations()}
	}
	if len(written) < len(queued) && len(stored) > 0 {
		// A quota not written keeps its reservations of stored objects:
		// the next batch drops them.
		r.quotas.mu.Lock()
		maps.Copy(r.quotas.storedLocked(ns), stored)
		r.quotas.mu.Unlock()
	}
	if len(written) > 0 {
		next := make([]api.Object, len(all))
		for i, o := range all {
			next[i] = o
			if w, ok := written[o.GetObjectMeta().Name]; ok {
				next[i] = w
			}
		}
		r.keepAfterOwnWrites(quotaKind, ns, writes, len(written), next)
	}
}

// updateQueued queues the update of a quota (store.Chainer), or makes it
// where the store cannot queue.
func (r *Registry) updateQueued(ctx context.Context, q *api.ResourceQuota) *store.Queued {
	if c, ok := r.store.(store.Chainer); ok {
		out, err := c.UpdateQueued(ctx, q)
		if err != nil {
			return store.Done(nil, err)
		}
		return out
	}
	return store.Done(r.store.Update(ctx, q))
}

// quotaOne checks (or releases) one waiter against quotas, charging the
// in-memory copies through their ledgers, and records which quotas changed.
func (r *Registry) quotaOne(quotas []*api.ResourceQuota, ledgers []*quota.Ledger, i int, w *quotaWaiter, result *error, changed map[int][]int) {
	m := w.req.Obj.GetObjectMeta()
	res := w.req.Kind.GroupResource()
	if w.release {
		for j, l := range ledgers {
			if l.Release(res, m.UID) {
				changed[j] = append(changed[j], i)
			}
		}
		return
	}
	deltas, err := quota.Check(quotas, w.req)
	if err != nil {
		*result = err
		return
	}
	if w.dryRun {
		return
	}
	for j, d := range deltas {
		ledgers[j].Charge(res, m.UID, m.Generation, d, w.req.Now)
		changed[j] = append(changed[j], i)
	}
}
