package apiserver

import (
	"context"
	"errors"
	"fmt"
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
//     the first's charge. A quota write that lost a race (the resourcequota
//     controller, another API server) is redone from the stored quota.
//   - Between batches the namespace's quotas are a list kept with the
//     batches' own writes in place (sharedlist.go), read again only when
//     someone else wrote one; and each quota's reservations as parsed.
var quotaKind = api.MustKindOf(&api.ResourceQuota{})

// quotaRetries bounds the rounds of one batch whose quota writes lost
// races (to the controller, which writes when usage went down, or to
// another API server): each round reads the quotas again.
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
	// charged are the quotas this request's charge was written to.
	charged []string
}

// chargeQuota runs quota admission for a write of obj (old: its stored
// state, nil on create) and returns what to call once the write is done
// (stored: it succeeded): it settles the charge, or takes it back. A
// refusal is a 403 in Kubernetes' words.
func (r *Registry) chargeQuota(ctx context.Context, k *api.Kind, obj, old api.Object) (func(ctx context.Context, stored bool), error) {
	nothing := func(context.Context, bool) {}
	if !k.Namespaced || k == quotaKind && old != nil || old != nil && !quota.UsageChanged(k, obj, old, time.Now()) {
		return nothing, nil
	}
	m := obj.GetObjectMeta()
	if n, err := r.countQuotas(ctx, m.Namespace); err == nil && n == 0 {
		return nothing, nil // the common case: no quota here, no queue
	}
	release := func() {
		rel := &quotaWaiter{req: quota.Request{Kind: k, Obj: obj, Now: time.Now()}, release: true, done: make(chan error, 1)}
		r.enqueueQuota(m.Namespace, rel)
		if err := <-rel.done; err != nil {
			r.log.Warn("quota: release the charge of a failed write", "kind", k.Kind, "key", api.KeyOf(obj), "err", err)
		}
	}
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
		return nil, ctx.Err()
	}
	if err != nil {
		if len(w.charged) > 0 { // charged to one quota, refused by another on a retry
			release()
		}
		if errors.Is(err, quota.ErrForbidden) {
			return nil, forbidden(k, m.Name, err.Error())
		}
		return nil, err
	}
	if len(w.charged) == 0 {
		return nothing, nil
	}
	return func(_ context.Context, stored bool) {
		if !stored {
			release()
			return
		}
		r.quotas.mu.Lock()
		if r.quotas.stored == nil {
			r.quotas.stored = map[string]map[string]bool{}
		}
		if r.quotas.stored[m.Namespace] == nil {
			r.quotas.stored[m.Namespace] = map[string]bool{}
		}
		r.quotas.stored[m.Namespace][k.GroupResource()+"/"+m.UID] = true
		r.quotas.mu.Unlock()
	}, nil
}

// countQuotas counts the namespace's quotas: the kept list's (listShared)
// while it holds, else without decoding them where the store can
// (store.Counter: a quota carries its reservations, and this is asked for
// every write).
func (r *Registry) countQuotas(ctx context.Context, ns string) (int, error) {
	if quotas, _, ok := r.kept(quotaKind, ns); ok {
		return len(quotas), nil
	}
	if c, ok := r.store.(store.Counter); ok {
		return c.Count(ctx, quotaKind, ns)
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
// and answers every waiter; a quota it writes drops the reservations of
// the objects stored since the last batch. The namespace's quotas are a
// list kept between batches (listShared), with the batch's own writes in
// place; memo holds their reservations as the batches left them.
func (r *Registry) quotaBatch(ctx context.Context, ns string, batch []*quotaWaiter, stored map[string]bool, memo map[string]quotaMemo) {
	results := make([]error, len(batch))
	only := map[string]bool(nil) // on a retry: the quotas whose writes failed
	for attempt := 0; ; attempt++ {
		all, writes, err := r.listShared(ctx, quotaKind, ns)
		if err != nil {
			for i := range results {
				results[i] = fmt.Errorf("quota admission: list quotas: %w", err)
			}
			break
		}
		var quotas []*api.ResourceQuota
		for _, o := range all {
			if q := o.(*api.ResourceQuota); only == nil || only[q.Name] {
				quotas = append(quotas, q)
			}
		}
		if len(all) == 0 {
			clear(memo) // no quota left here: no reservations to keep
		}
		if len(quotas) == 0 {
			break
		}
		// Each quota's reservations are read once for the batch and
		// written once, when it changed (quota.Ledger).
		ledgers := make([]*quota.Ledger, len(quotas))
		for i, q := range quotas {
			quotas[i] = api.Clone(q)
			if m, ok := memo[q.Name]; ok && m.uid == q.UID && m.rv == q.ResourceVersion {
				ledgers[i] = quota.NewLedgerWith(quotas[i], slices.Clone(m.rs))
			} else {
				ledgers[i] = quota.NewLedger(quotas[i])
			}
		}
		changed := map[int][]int{} // quota index → waiters charged to it
		for i, w := range batch {
			if results[i] != nil {
				continue
			}
			r.quotaOne(quotas, ledgers, i, w, &results[i], changed)
		}
		failed := map[string]bool{}
		written := map[string]api.Object{}
		for j, ws := range changed {
			ledgers[j].Settle(stored)
			ledgers[j].Flush()
			out, err := r.store.Update(ctx, quotas[j])
			if err != nil {
				failed[quotas[j].Name] = true
				if attempt == quotaRetries-1 || !api.IsConflict(err) {
					for _, i := range ws {
						results[i] = fmt.Errorf("quota admission: update quota %s: %w", quotas[j].Name, err)
					}
				}
				continue
			}
			om := out.GetObjectMeta()
			written[om.Name] = out
			memo[om.Name] = quotaMemo{uid: om.UID, rv: om.ResourceVersion, rs: ledgers[j].Reservations()}
			for _, i := range ws {
				batch[i].charged = append(batch[i].charged, quotas[j].Name)
			}
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
		if len(failed) == 0 || attempt == quotaRetries-1 {
			break
		}
		only = failed
	}
	for i, w := range batch {
		w.done <- results[i]
	}
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
