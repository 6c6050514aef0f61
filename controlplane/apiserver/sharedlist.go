package apiserver

import (
	"context"
	"sync"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/store"
)

// # Lists kept between requests
//
// Admission lists a few kinds for every pod create that change a few
// times a term: the namespace's LimitRanges and ResourceQuotas, the
// cluster's PriorityClasses. Where the store counts its writes
// (store.WriteCounter), a list is kept with the count of writes to its
// kind and namespace noted before it was read, and served again while that
// count has not moved: exact, never stale (a write is counted before its
// writer hears of it). Kept lists are shared: read only.

// sharedListsMax bounds the kept lists: a lab room has a few hundred
// namespaces; when full, every list is dropped and read again as needed.
const sharedListsMax = 4096

// sharedLists are the lists kept by kind and namespace.
type sharedLists struct {
	mu sync.Mutex
	m  map[listScope]sharedList
}

type listScope struct {
	kind      *api.Kind
	namespace string
}

// sharedList is a kept list: what was stored when the count of writes to
// its kind and namespace was writes.
type sharedList struct {
	writes uint64
	items  []api.Object
}

// kept returns the list of k in namespace when one is kept and still what
// is stored, with the count of writes it holds for.
func (r *Registry) kept(k *api.Kind, namespace string) ([]api.Object, uint64, bool) {
	wc, ok := r.store.(store.WriteCounter)
	if !ok {
		return nil, 0, false
	}
	r.lists.mu.Lock()
	l, ok := r.lists.m[listScope{k, namespace}]
	r.lists.mu.Unlock()
	if !ok || wc.Writes(k, namespace) != l.writes {
		return nil, 0, false
	}
	return l.items, l.writes, true
}

// listShared returns the objects of k in namespace (shared: read only) and
// the count of writes to them it holds for (0 where the store counts none):
// the kept list while it is still what is stored, else a List, then kept.
func (r *Registry) listShared(ctx context.Context, k *api.Kind, namespace string) ([]api.Object, uint64, error) {
	if items, writes, ok := r.kept(k, namespace); ok {
		return items, writes, nil
	}
	wc, counted := r.store.(store.WriteCounter)
	var writes uint64
	if counted {
		writes = wc.Writes(k, namespace) // before the read: a write meanwhile moves it past
	}
	items, _, err := r.store.List(ctx, k, namespace)
	if err != nil {
		return nil, 0, err
	}
	if items == nil {
		items = []api.Object{}
	}
	if counted {
		r.keep(k, namespace, writes, items)
	}
	return items, writes, nil
}

// keepAfterOwnWrites keeps items as the list of k in namespace after the
// caller, who listed it at count writes, wrote n of its objects itself:
// when the count moved by exactly n, no one else wrote one meanwhile, and
// items (the list with the caller's writes in place) is what is stored.
// Otherwise nothing is kept.
func (r *Registry) keepAfterOwnWrites(k *api.Kind, namespace string, writes uint64, n int, items []api.Object) {
	wc, ok := r.store.(store.WriteCounter)
	if !ok {
		return
	}
	if now := wc.Writes(k, namespace); now == writes+uint64(n) {
		r.keep(k, namespace, now, items)
		return
	}
	r.lists.mu.Lock()
	delete(r.lists.m, listScope{k, namespace})
	r.lists.mu.Unlock()
}

func (r *Registry) keep(k *api.Kind, namespace string, writes uint64, items []api.Object) {
	r.lists.mu.Lock()
	defer r.lists.mu.Unlock()
	if r.lists.m == nil || len(r.lists.m) >= sharedListsMax {
		r.lists.m = map[listScope]sharedList{}
	}
	r.lists.m[listScope{k, namespace}] = sharedList{writes: writes, items: items}
}
