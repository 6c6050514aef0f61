package controllers

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// The garbage collector deletes objects whose owners are all gone. A pod
// created by a ReplicaSet carries an ownerReference to it (kind, name and
// uid); when the ReplicaSet is deleted, nothing else would ever remove the
// pod. Deleting a Deployment thus cascades: its ReplicaSets lose their
// owner and are deleted, then their pods lose theirs.
//
// Owners are identified by uid: a new object with the same name is a
// different owner, and does not keep the old one's dependents alive.
//
// One reconcile looks at one dependent, keyed "Kind:namespace/name":
//
//  1. For each ownerReference, is the owner alive? First the cache of its
//     kind (same name and uid: alive). The cache may lag (an owner just
//     created), so "not in the cache" is confirmed with a live Get before
//     anything is deleted. Owners of kinds without a cache are always
//     checked with Get.
//  2. If no owner is alive, delete the dependent, with a uid precondition
//     (a new object of the same name is left alone).
//
// Uids never come back, so an owner once confirmed gone is remembered
// (a small cache) and not asked about again.
//
// Not done here: orphan propagation (deleting an owner while keeping its
// dependents) and foreground deletion; every delete is "background".
type GarbageCollector struct {
	client client.Interface
	graph  map[string]Lister // kind name ("Pod") → cache of that kind
	events EventRecorder
	log    *slog.Logger

	mu   sync.Mutex
	gone map[string]bool // uids of owners confirmed absent
}

// maxGoneUIDs bounds the "owner is gone" cache; when full it starts over
// (the cost is a few extra Gets).
const maxGoneUIDs = 10000

// ownerIndex is the name of the informer index "owner uid → dependents".
const ownerIndex = "owner-uid"

// NewGarbageCollector returns the collector. graph maps kind names
// ("Pod", "ReplicaSet") to caches of all namespaces: the kinds whose
// objects it collects, and the owners it can check without a Get.
func NewGarbageCollector(c client.Interface, graph map[string]Lister, events EventRecorder, log *slog.Logger) *GarbageCollector {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if events == nil {
		events = nopRecorder{}
	}
	return &GarbageCollector{
		client: c,
		graph:  graph,
		events: events,
		log:    log.With("controller", garbageCollectorName),
		gone:   map[string]bool{},
	}
}

// Watch wires the informers of the graph to enqueue: a dependent that is
// added or changed (it may carry a dead owner), and the dependents of every
// deleted object (by an index of owner uids). Call before the informers run.
func (g *GarbageCollector) Watch(graph map[string]*client.Informer, enqueue func(key string)) {
	for _, inf := range graph {
		inf.AddIndex(ownerIndex, func(obj api.Object) []string {
			var uids []string
			for _, r := range obj.GetObjectMeta().OwnerReferences {
				uids = append(uids, r.UID)
			}
			return uids
		})
	}
	for kind, inf := range graph {
		dependent := func(obj api.Object) {
			if len(obj.GetObjectMeta().OwnerReferences) > 0 {
				enqueue(gcKey(kind, obj))
			}
		}
		inf.AddHandler(client.Handler{
			OnAdd:    dependent,
			OnUpdate: func(_, obj api.Object) { dependent(obj) },
			OnDelete: func(owner api.Object) {
				for depKind, depInf := range graph {
					for _, dep := range depInf.ByIndex(ownerIndex, owner.GetObjectMeta().UID) {
						enqueue(gcKey(depKind, dep))
					}
				}
			},
		})
	}
}

// gcKey is "Kind:namespace/name".
func gcKey(kind string, obj api.Object) string {
	return kind + ":" + api.KeyOf(obj)
}

// gcKeys lists the keys of every cached object that has owners: the resync.
func gcKeys(graph map[string]*client.Informer) []string {
	var keys []string
	for kind, inf := range graph {
		for _, obj := range inf.List() {
			if len(obj.GetObjectMeta().OwnerReferences) > 0 {
				keys = append(keys, gcKey(kind, obj))
			}
		}
	}
	sort.Strings(keys)
	return keys
}

// listersOf narrows informers to Listers.
func listersOf(graph map[string]*client.Informer) map[string]Lister {
	out := make(map[string]Lister, len(graph))
	for k, inf := range graph {
		out[k] = inf
	}
	return out
}

// Reconcile checks the owners of the dependent key ("Kind:namespace/name")
// and deletes it if none is alive. It implements client.Reconciler.
func (g *GarbageCollector) Reconcile(ctx context.Context, key string) error {
	kindName, rest, ok := strings.Cut(key, ":")
	lister, known := g.graph[kindName]
	if !ok || !known {
		g.log.Warn("bad key; nothing done", "key", key)
		return nil
	}
	ns, name := client.SplitKey(rest)
	obj, ok := lister.Get(ns, name)
	if !ok {
		return nil // already gone
	}
	m := obj.GetObjectMeta()
	if len(m.OwnerReferences) == 0 || m.DeletionTimestamp != nil {
		return nil
	}
	var alive, dead []string
	for _, ref := range m.OwnerReferences {
		desc := fmt.Sprintf("%s %s", ref.Kind, ref.Name)
		exists, err := g.ownerExists(ctx, ns, ref)
		if err != nil {
			return fmt.Errorf("garbage collector: %s %s: check owner %s: %w", kindName, rest, desc, err)
		}
		if exists {
			alive = append(alive, desc)
		} else {
			dead = append(dead, desc)
		}
	}
	objKey := strings.ToLower(kindName) + " " + rest
	observed := fmt.Sprintf("owners alive [%s], gone [%s]", strings.Join(alive, ", "), strings.Join(dead, ", "))
	const desired = "delete when every owner is gone"
	if len(alive) > 0 {
		logReconcile(g.log, false, objKey, observed, desired, "none")
		return nil
	}

	k, err := api.LookupKind(obj.GetTypeMeta().APIVersion, kindName)
	if err != nil {
		k = api.MustKindOf(obj)
	}
	uid := m.UID
	err = g.client.Delete(ctx, k, ns, name, api.DeleteOptions{Preconditions: &api.Preconditions{UID: &uid}, PropagationPolicy: "Background"})
	if err != nil && !api.IsNotFound(err) && !api.IsConflict(err) { // Conflict: the uid changed, a new object took the name
		return fmt.Errorf("garbage collector: delete %s %s: %w", kindName, rest, err)
	}
	logReconcile(g.log, true, objKey, observed, desired, "deleted")
	return nil
}

// ownerExists reports whether the owner ref points at (same uid) is alive:
// from the cache when one holds it, else (or to confirm an absence) by a
// live Get. An owner kind that is not registered cannot be checked and
// counts as alive: never delete on a guess.
func (g *GarbageCollector) ownerExists(ctx context.Context, namespace string, ref api.OwnerReference) (bool, error) {
	g.mu.Lock()
	gone := g.gone[ref.UID]
	g.mu.Unlock()
	if gone {
		return false, nil
	}
	k, err := api.LookupKind(ref.APIVersion, ref.Kind)
	if err != nil {
		g.log.Debug("owner kind is not served; treating the owner as alive", "apiVersion", ref.APIVersion, "kind", ref.Kind, "owner", ref.Name)
		return true, nil
	}
	if !k.Namespaced {
		namespace = ""
	}
	if l, ok := g.graph[k.Kind]; ok {
		if o, ok := l.Get(namespace, ref.Name); ok && o.GetObjectMeta().UID == ref.UID {
			return true, nil
		}
	}
	// Not in the cache (or no cache): ask the API server itself.
	o, err := g.client.Get(ctx, k, namespace, ref.Name)
	switch {
	case err == nil && o.GetObjectMeta().UID == ref.UID:
		return true, nil
	case err == nil, api.IsNotFound(err):
		g.mu.Lock()
		if len(g.gone) >= maxGoneUIDs {
			g.gone = map[string]bool{}
		}
		g.gone[ref.UID] = true
		g.mu.Unlock()
		return false, nil
	default:
		return false, err
	}
}
