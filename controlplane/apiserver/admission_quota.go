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
	// known is, by namespace, what its batches know of its quotas; only
	// the namespace's worker changes an entry (under mu, which readers hold).
	known map[string]*quotaKnown
}

// quotaKnown is what a namespace's batches know of its quotas between
// them:
//   - quotas, the namespace's quotas as the last batch read or wrote them
//     (shared: read only), still what is stored while the store's count of
//     quota writes in the namespace is writes (store.WriteCounter), so the
//     next batch need not list and decode them again; nil: not known;
//   - memo, each quota's reservations as the last batch that wrote it left
//     them (quotaMemo), which needs no count: it names the
//     resourceVersion it holds for.
type quotaKnown struct {
	writes uint64
	quotas []*api.ResourceQuota
	memo   map[string]quotaMemo
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

// countQuotas counts the namespace's quotas, without decoding them where
// the store can (store.Counter: a quota carries its reservations, and this
// is asked for every write).
func (r *Registry) countQuotas(ctx context.Context, ns string) (int, error) {
	if quotas, ok := r.knownQuotas(ns); ok {
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
		if qa.known == nil {
			qa.known = map[string]*quotaKnown{}
		}
		known := qa.known[ns]
		if known == nil {
			known = &quotaKnown{memo: map[string]quotaMemo{}}
			qa.known[ns] = known
		}
		qa.mu.Unlock()
		r.quotaBatch(context.Background(), ns, batch, stored, known)
	}
}

// knownQuotas returns the namespace's quotas where a batch knows them and
// no quota of the namespace was written since (shared: read only).
func (r *Registry) knownQuotas(ns string) ([]*api.ResourceQuota, bool) {
	wc, ok := r.store.(store.WriteCounter)
	if !ok {
		return nil, false
	}
	qa := &r.quotas
	qa.mu.Lock()
	k := qa.known[ns]
	var quotas []*api.ResourceQuota
	var writes uint64
	if k != nil {
		quotas, writes = k.quotas, k.writes
	}
	qa.mu.Unlock()
	if quotas == nil || wc.Writes(quotaKind, ns) != writes {
		return nil, false
	}
	return quotas, true
}

// listQuotas returns the namespace's quotas (shared: read only): those
// known when they still are (knownQuotas), else read from the store, and
// then known, with the count of writes noted before the read.
func (r *Registry) listQuotas(ctx context.Context, ns string, known *quotaKnown) ([]*api.ResourceQuota, error) {
	if quotas, ok := r.knownQuotas(ns); ok {
		return quotas, nil
	}
	wc, counted := r.store.(store.WriteCounter)
	var writes uint64
	if counted {
		writes = wc.Writes(quotaKind, ns)
	}
	items, _, err := r.store.List(ctx, quotaKind, ns)
	if err != nil {
		return nil, err
	}
	quotas := make([]*api.ResourceQuota, len(items))
	for i, o := range items {
		quotas[i] = o.(*api.ResourceQuota)
	}
	if counted {
		r.setKnown(ns, known, writes, quotas)
	}
	return quotas, nil
}

// setKnown records quotas as the namespace's, as of the count of writes
// (nil: not known).
func (r *Registry) setKnown(ns string, known *quotaKnown, writes uint64, quotas []*api.ResourceQuota) {
	r.quotas.mu.Lock()
	known.writes, known.quotas = writes, quotas
	if len(quotas) == 0 { // no quota left here: no reservations to keep
		clear(known.memo)
	}
	r.quotas.mu.Unlock()
}

// quotaBatch checks and charges a batch against the namespace's quotas
// and answers every waiter; a quota it writes drops the reservations of
// the objects stored since the last batch. known is what the namespace's
// batches know of its quotas (quotaKnown), which this one reads and keeps.
func (r *Registry) quotaBatch(ctx context.Context, ns string, batch []*quotaWaiter, stored map[string]bool, known *quotaKnown) {
	results := make([]error, len(batch))
	only := map[string]bool(nil) // on a retry: the quotas whose writes failed
	for attempt := 0; ; attempt++ {
		all, err := r.listQuotas(ctx, ns, known)
		if err != nil {
			for i := range results {
				results[i] = fmt.Errorf("quota admission: list quotas: %w", err)
			}
			break
		}
		var quotas []*api.ResourceQuota
		for _, q := range all {
			if only == nil || only[q.Name] {
				quotas = append(quotas, q)
			}
		}
		if len(quotas) == 0 {
			break
		}
		// Each quota's reservations are read once for the batch and
		// written once, when it changed (quota.Ledger).
		ledgers := make([]*quota.Ledger, len(quotas))
		for i, q := range quotas {
			quotas[i] = api.Clone(q)
			if m, ok := known.memo[q.Name]; ok && m.uid == q.UID && m.rv == q.ResourceVersion {
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
		written := map[string]*api.ResourceQuota{}
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
			written[om.Name] = out.(*api.ResourceQuota)
			known.memo[om.Name] = quotaMemo{uid: om.UID, rv: om.ResourceVersion, rs: ledgers[j].Reservations()}
			for _, i := range ws {
				batch[i].charged = append(batch[i].charged, quotas[j].Name)
			}
		}
		r.keepWritten(ns, known, all, written)
		if len(failed) == 0 || attempt == quotaRetries-1 {
			break
		}
		only = failed
	}
	for i, w := range batch {
		w.done <- results[i]
	}
}

// keepWritten updates what is known of the namespace's quotas after a
// batch wrote some of all, the list it started from: when the store's count
// moved by exactly the batch's writes, no one else wrote a quota here
// meanwhile, and all with the written ones in place is what is stored.
// Otherwise nothing is known until the next read.
func (r *Registry) keepWritten(ns string, known *quotaKnown, all []*api.ResourceQuota, written map[string]*api.ResourceQuota) {
	wc, ok := r.store.(store.WriteCounter)
	if !ok || len(written) == 0 {
		return
	}
	r.quotas.mu.Lock()
	before, was := known.writes, known.quotas
	r.quotas.mu.Unlock()
	if was == nil || !slices.Equal(was, all) {
		return // all was not the known list (its count is not before)
	}
	now := wc.Writes(quotaKind, ns)
	if now != before+uint64(len(written)) {
		r.setKnown(ns, known, 0, nil)
		return
	}
	next := make([]*api.ResourceQuota, len(all))
	for i, q := range all {
		next[i] = q
		if w, ok := written[q.Name]; ok {
			next[i] = w
		}
	}
	r.setKnown(ns, known, now, next)
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
