package controllers

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// The volume protection controllers, as Kubernetes' pvc-protection and
// pv-protection controllers. The API server gives every new claim the
// finalizer kubernetes.io/pvc-protection and every new volume
// kubernetes.io/pv-protection (admission_storage.go), so a delete only
// marks them Terminating; these loops take the finalizer off when removing
// the object can no longer hurt:
//
//	claim: no pod bound to a node and not finished (Succeeded or Failed)
//	       names it in a volume (the cache is asked, then the API, so a pod
//	       made a moment ago is not missed)
//	volume: it is not Bound to a claim
//
// A claim deleted while its pod runs stays Terminating until the pod is
// gone; the data of a volume bound to it is not lost under a running pod.
type PVCProtectionController struct {
	client client.Interface
	claims Lister // *api.PersistentVolumeClaim
	pods   Lister // *api.Pod
	log    *slog.Logger
}

const (
	pvcProtectionControllerName = "pvc-protection-controller"
	pvProtectionControllerName  = "pv-protection-controller"
)

func claimKind() *api.Kind  { return api.MustKindOf(&api.PersistentVolumeClaim{}) }
func volumeKind() *api.Kind { return api.MustKindOf(&api.PersistentVolume{}) }

// NewPVCProtectionController returns the controller over caches of
// claims and pods.
func NewPVCProtectionController(c client.Interface, claims, pods Lister, log *slog.Logger) *PVCProtectionController {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &PVCProtectionController{client: c, claims: claims, pods: pods, log: log.With("controller", pvcProtectionControllerName)}
}

// PodHandler enqueues the claims of a pod that changed or went away (its
// finishing or deletion may free them).
func (p *PVCProtectionController) PodHandler(enqueue func(key string)) client.Handler {
	f := func(o api.Object) {
		if pod, ok := o.(*api.Pod); ok {
			for _, c := range api.ClaimsOf(pod) {
				enqueue(api.Key(pod.Namespace, c))
			}
		}
	}
	return client.Handler{OnAdd: f, OnUpdate: func(_, n api.Object) { f(n) }, OnDelete: f}
}

// Reconcile implements client.Reconciler.
func (p *PVCProtectionController) Reconcile(ctx context.Context, key string) error {
	ns, name := splitKey(key)
	c, ok := getAs[*api.PersistentVolumeClaim](p.claims, ns, name)
	if !ok || c.DeletionTimestamp == nil || !slices.Contains(c.Finalizers, api.FinalizerPVCProtection) {
		logReconcile(p.log, false, key, "not being deleted, or not protected", "keep", "none")
		return nil
	}
	if user := claimUser(listAs[*api.Pod](p.pods.ListBy(nil, ns)), name); user != "" {
		logReconcile(p.log, false, key, "deleted, used by pod "+user, "keep until the pod is gone", "none")
		return nil
	}
	// The cache may lag a pod made a moment ago: ask the API itself.
	live, _, err := p.client.List(ctx, api.MustKindOf(&api.Pod{}), ns, api.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods of %s: %w", ns, err)
	}
	if user := claimUser(listAs[*api.Pod](live), name); user != "" {
		logReconcile(p.log, false, key, "deleted, used by pod "+user, "keep until the pod is gone", "none")
		return nil
	}
	if err := removeFinalizer(ctx, p.client, c, api.FinalizerPVCProtection); err != nil {
		return requeueOnConflict(p.log, key, err)
	}
	logReconcile(p.log, true, key, "deleted, no pod uses it", "gone", "removed finalizer "+api.FinalizerPVCProtection)
	return nil
}

// claimUser is the name of a pod that uses the claim: bound to a node,
// not finished, naming it in a volume; "" when none does.
func claimUser(pods []*api.Pod, claim string) string {
	for _, pod := range pods {
		if pod.Spec.NodeName == "" || pod.Status.Phase == api.PodSucceeded || pod.Status.Phase == api.PodFailed {
			continue
		}
		if slices.Contains(api.ClaimsOf(pod), claim) {
			return pod.Name
		}
	}
	return ""
}

// removeFinalizer writes obj without finalizer f (a copy: obj is the
// cache's). The write carries obj's resourceVersion: a stale cache is a
// Conflict, and the loop looks again.
func removeFinalizer(ctx context.Context, c client.Interface, obj api.Object, f string) error {
	u := api.Clone(obj)
	m := u.GetObjectMeta()
	m.Finalizers = slices.DeleteFunc(m.Finalizers, func(s string) bool { return s == f })
	if _, err := c.Update(ctx, u); err != nil && !api.IsNotFound(err) {
		return fmt.Errorf("remove finalizer %s from %s: %w", f, api.KeyOf(obj), err)
	}
	return nil
}

// PVProtectionController removes kubernetes.io/pv-protection from a
// deleted volume that is not Bound.
type PVProtectionController struct {
	client  client.Interface
	volumes Lister // *api.PersistentVolume
	log     *slog.Logger
}

// NewPVProtectionController returns the controller over a cache of volumes.
func NewPVProtectionController(c client.Interface, volumes Lister, log *slog.Logger) *PVProtectionController {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &PVProtectionController{client: c, volumes: volumes, log: log.With("controller", pvProtectionControllerName)}
}

// Reconcile implements client.Reconciler.
func (p *PVProtectionController) Reconcile(ctx context.Context, key string) error {
	pv, ok := getAs[*api.PersistentVolume](p.volumes, "", key)
	if !ok || pv.DeletionTimestamp == nil || !slices.Contains(pv.Finalizers, api.FinalizerPVProtection) {
		logReconcile(p.log, false, key, "not being deleted, or not protected", "keep", "none")
		return nil
	}
	if pv.Status.Phase == api.VolumeBound {
		logReconcile(p.log, false, key, "deleted, Bound", "keep until released", "none")
		return nil
	}
	if err := removeFinalizer(ctx, p.client, pv, api.FinalizerPVProtection); err != nil {
		return requeueOnConflict(p.log, key, err)
	}
	logReconcile(p.log, true, key, "deleted, "+pv.Status.Phase, "gone", "removed finalizer "+api.FinalizerPVProtection)
	return nil
}
