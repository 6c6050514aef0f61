package controllers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// NamespaceFinalizer removes the "kubernetes" finalizer of a namespace
// (PUT /api/v1/namespaces/NAME/finalize), after which the API server
// deletes the namespace itself. It is idempotent: finalizing a namespace
// that is already finalized or gone is not an error (NotFound may be
// returned and is ignored). Safe for concurrent use.
type NamespaceFinalizer interface {
	FinalizeNamespace(ctx context.Context, name string) error
}

// The namespace controller empties a namespace that is being deleted.
// `delete namespace` does not remove it at once: the API server marks it
// Terminating (deletionTimestamp set, status.phase Terminating) and keeps
// it while its spec.finalizers holds "kubernetes". One reconcile:
//
//  1. If the namespace is not Terminating, or already finalized: nothing.
//  2. Delete every object of every namespaced kind in it: the owners that
//     make more objects first (Deployments, ReplicaSets: so they stop
//     replacing what is deleted), Events last (the deletions themselves
//     make events). Pods are deleted gracefully: the node stops them and
//     then removes them.
//  3. If anything is left (pods still stopping), look again in a moment.
//  4. When nothing is left, finalize: the API server deletes the namespace.
//
// A system namespace that is gone (kube-node-lease: the others may not be
// deleted) is created again, as kube-apiserver's system namespaces
// controller does; here at once, there once a minute.
type NamespaceController struct {
	client     client.Interface
	finalizer  NamespaceFinalizer
	namespaces Lister // *api.Namespace
	events     EventRecorder
	log        *slog.Logger
	kinds      []*api.Kind       // namespaced kinds, in deletion order
	caches     map[string]Lister // kind ("Pod") → cache of all its objects, for the kinds that have one
}

// finalizerKubernetes is the finalizer this controller owns.
const finalizerKubernetes = "kubernetes"

// namespaceRecheck is how soon a namespace with objects still terminating
// is looked at again.
const namespaceRecheck = 2 * time.Second

// NewNamespaceController returns the controller; namespaces is a cache of
// all namespaces.
func NewNamespaceController(c client.Interface, fin NamespaceFinalizer, namespaces Lister, events EventRecorder, log *slog.Logger) *NamespaceController {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if events == nil {
		events = nopRecorder{}
	}
	return &NamespaceController{
		client:     c,
		finalizer:  fin,
		namespaces: namespaces,
		events:     events,
		log:        log.With("controller", namespaceControllerName),
		kinds:      deletionOrder(api.Kinds),
	}
}

// UseCaches lets the controller find what to delete in the caches the
// controllers already keep (kind name, e.g. "Pod", → a Lister of every
// object of that kind) instead of listing through the API. A list of
// 20,000 pods is a fresh decoded copy of each, held for the whole pass
// (docs/performance.md, "Memory at scale"); the cache's objects are
// already in memory. A cache may lag, so "empty" is never taken from it:
// when the cache has nothing left in the namespace, the API is listed to
// make sure. Call before the loop runs.
func (n *NamespaceController) UseCaches(caches map[string]Lister) { n.caches = caches }

// deletionOrder returns the namespaced kinds: the ones whose controllers
// create other objects first, Events last, the rest in registry order.
func deletionOrder(kinds []*api.Kind) []*api.Kind {
	rank := func(k *api.Kind) int {
		switch k.Kind {
		case "Deployment", "DaemonSet", "CronJob", "StatefulSet":
			return 0
		case "ReplicaSet", "Job":
			return 1
		case "Event":
			return 3
		default:
			return 2
		}
	}
	var out []*api.Kind
	for _, k := range kinds {
		// Internal kinds (pod traces) belong to other objects: the API
		// server removes them with their owners.
		if k.Namespaced && !k.Internal {
			out = append(out, k)
		}
	}
	slices.SortStableFunc(out, func(a, b *api.Kind) int { return rank(a) - rank(b) })
	return out
}

// Reconcile empties the namespace key (its name) if it is being deleted,
// then finalizes it. It implements client.Reconciler.
func (n *NamespaceController) Reconcile(ctx context.Context, key string) error {
	ns, ok := getAs[*api.Namespace](n.namespaces, "", key)
	if !ok {
		return n.recreateSystem(ctx, key)
	}
	if ns.DeletionTimestamp == nil && ns.Status.Phase != api.NamespaceTerminating {
		logReconcile(n.log, false, key, phaseOr(ns.Status.Phase, api.NamespaceActive), "keep", "none")
		return nil
	}
	if !slices.Contains(ns.Spec.Finalizers, finalizerKubernetes) {
		logReconcile(n.log, false, key, "Terminating and finalized", "gone", "none (the API server removes it)")
		return nil
	}

	left, deleted, err := n.deleteContents(ctx, key)
	if err != nil {
		n.events.Eventf(ctx, ns, api.EventWarning, "NamespaceDeletionContentFailure", "Failed to delete all resources in namespace %s: %v", key, err)
		return fmt.Errorf("namespace %s: delete contents: %w", key, err)
	}
	if len(left) > 0 {
		action := "waiting"
		if deleted > 0 {
			action = fmt.Sprintf("deleted %s, waiting", plural(deleted, "object"))
		}
		logReconcile(n.log, true, key, "Terminating with "+strings.Join(left, ", ")+" left", "empty", action)
		return client.RequeueAfter(namespaceRecheck)
	}
	if err := n.finalizer.FinalizeNamespace(ctx, key); err != nil && !api.IsNotFound(err) {
		return fmt.Errorf("namespace %s: finalize: %w", key, err)
	}
	logReconcile(n.log, true, key, "Terminating and empty", "gone", "finalized")
	return nil
}

// recreateSystem creates the namespace name again if it is one of
// api.SystemNamespaces.
func (n *NamespaceController) recreateSystem(ctx context.Context, name string) error {
	if !slices.Contains(api.SystemNamespaces, name) {
		return nil
	}
	_, err := n.client.Create(ctx, &api.Namespace{ObjectMeta: api.ObjectMeta{Name: name}})
	if err != nil && !api.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: create system namespace: %w", name, err)
	}
	logReconcile(n.log, true, name, "absent", "present (a system namespace)", "created")
	return nil
}

// deleteContents deletes what is in namespace and reports what is still
// there per kind ("3 pods"), and how many deletes it issued. Objects
// already being deleted are waited for, not deleted again.
func (n *NamespaceController) deleteContents(ctx context.Context, namespace string) (left []string, deleted int, err error) {
	var errs []error
	for _, k := range n.kinds {
		var objs []api.Object
		if cache := n.caches[k.Kind]; cache != nil {
			objs = cache.ListBy(nil, namespace)
		}
		var err error
		if len(objs) == 0 { // no cache, or it says empty: ask the API
			objs, _, err = n.client.List(ctx, k, namespace, api.ListOptions{})
		}
		if err != nil {
			if k.Internal {
				// Best effort: the API server removes internal objects
				// (pod traces) with their pods anyway.
				n.log.Debug("list failed; skipped", "namespace", namespace, "resource", k.Resource, "err", err)
				continue
			}
			errs = append(errs, fmt.Errorf("list %s: %w", k.Resource, err))
			continue
		}
		remaining := 0
		for _, o := range objs {
			m := o.GetObjectMeta()
			if m.DeletionTimestamp != nil {
				remaining++ // terminating: wait for it
				continue
			}
			err := n.client.Delete(ctx, k, namespace, m.Name, api.DeleteOptions{})
			switch {
			case err == nil:
				deleted++
				// A pod on a node only starts terminating; check it next time.
				if k.Kind == "Pod" {
					remaining++
				}
			case api.IsNotFound(err):
			default:
				errs = append(errs, fmt.Errorf("delete %s %s: %w", k.Singular, m.Name, err))
				remaining++
			}
		}
		if remaining > 0 {
			left = append(left, fmt.Sprintf("%d %s", remaining, k.Resource))
		}
	}
	return left, deleted, errors.Join(errs...)
}

func phaseOr(phase, def string) string {
	if phase == "" {
		return def
	}
	return phase
}
