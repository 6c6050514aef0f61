package controllers

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// The resourceclaim controller (Kubernetes' resource-claim-controller)
// looks after the claims of pods (DRA). One loop, two kinds of keys:
//
//	pod/NAMESPACE/NAME    for each spec.resourceClaims entry naming a
//	                      template, make the pod its claim: named
//	                      POD-ENTRY-XXXXX (generateName), owned by the pod
//	                      (controller, blockOwnerDeletion), annotated
//	                      resource.kubernetes.io/pod-claim-name: ENTRY, with
//	                      the template's labels, annotations and spec; then
//	                      record it in the pod's status.resourceClaimStatuses
//	claim/NAMESPACE/NAME  drop from status.reservedFor the pods that are gone
//	                      or done; a claim no pod reserves any more is
//	                      deallocated (status.allocation cleared), then
//	                      loses the delete-protection finalizer; a claim
//	                      made from a template is deleted once its pod is
//	                      done and it is unreserved
//
// The scheduler allocates and reserves (its DynamicResources plugin); the
// node agent prepares. Everything is read from the caches; a write that
// conflicts is retried through the loop.
const resourceClaimControllerName = "resource-claim-controller"

const (
	podKeyPrefix   = "pod/"
	claimKeyPrefix = "claim/"
	// generatedClaimBaseMax: Kubernetes truncates POD-ENTRY to 57
	// characters, so the name with "-" and 5 random characters fits 63.
	generatedClaimBaseMax = 57
)

func resourceClaimKind() *api.Kind         { return api.MustKindOf(&api.ResourceClaim{}) }
func resourceClaimTemplateKind() *api.Kind { return api.MustKindOf(&api.ResourceClaimTemplate{}) }

// ResourceClaimController makes template claims and releases claims.
type ResourceClaimController struct {
	client    client.Interface
	pods      Lister // *api.Pod
	claims    Lister // *api.ResourceClaim
	templates Lister // *api.ResourceClaimTemplate
	recorder  EventRecorder
	log       *slog.Logger
}

// NewResourceClaimController returns the controller over the caches.
func NewResourceClaimController(c client.Interface, pods, claims, templates Lister, rec EventRecorder, log *slog.Logger) *ResourceClaimController {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if rec == nil {
		rec = nopRecorder{}
	}
	return &ResourceClaimController{client: c, pods: pods, claims: claims, templates: templates, recorder: rec, log: log.With("controller", resourceClaimControllerName)}
}

// Handlers enqueue the keys: a pod with claims (its own key, and its
// claims' when it is done or gone), a claim (its key, and its owner pod's).
func (rc *ResourceClaimController) Handlers(enqueue func(string)) (pods, claims client.Handler) {
	onPod := func(o api.Object) {
		p := o.(*api.Pod)
		if len(p.Spec.ResourceClaims) == 0 {
			return
		}
		enqueue(podKeyPrefix + api.KeyOf(p))
		for i := range p.Spec.ResourceClaims {
			if name, ok := api.ClaimName(p, &p.Spec.ResourceClaims[i]); ok {
				enqueue(claimKeyPrefix + api.Key(p.Namespace, name))
			}
		}
	}
	onClaim := func(o api.Object) {
		c := o.(*api.ResourceClaim)
		enqueue(claimKeyPrefix + api.KeyOf(c))
		if ref := api.ControllerOf(c); ref != nil && ref.Kind == "Pod" {
			enqueue(podKeyPrefix + api.Key(c.Namespace, ref.Name))
		}
	}
	pods = client.Handler{OnAdd: onPod, OnUpdate: func(_, o api.Object) { onPod(o) }, OnDelete: onPod}
	claims = client.Handler{OnAdd: onClaim, OnUpdate: func(_, o api.Object) { onClaim(o) }, OnDelete: onClaim}
	return pods, claims
}

// Keys lists every key, for the loop's resync.
func (rc *ResourceClaimController) Keys() []string {
	var out []string
	for _, o := range rc.claims.ListBy(nil, "") {
		out = append(out, claimKeyPrefix+api.KeyOf(o))
	}
	for _, o := range rc.pods.ListBy(nil, "") {
		if len(o.(*api.Pod).Spec.ResourceClaims) > 0 {
			out = append(out, podKeyPrefix+api.KeyOf(o))
		}
	}
	return out
}

// Reconcile implements client.Reconciler.
func (rc *ResourceClaimController) Reconcile(ctx context.Context, key string) error {
	switch {
	case strings.HasPrefix(key, podKeyPrefix):
		return rc.syncPod(ctx, strings.TrimPrefix(key, podKeyPrefix))
	case strings.HasPrefix(key, claimKeyPrefix):
		return rc.syncClaim(ctx, strings.TrimPrefix(key, claimKeyPrefix))
	}
	return nil
}

// podDone: the pod will never run (again): finished, or being deleted
// before it was bound (Kubernetes' isPodDone).
func podDone(p *api.Pod) bool {
	return p.Status.Phase == api.PodSucceeded || p.Status.Phase == api.PodFailed ||
		(p.DeletionTimestamp != nil && p.Spec.NodeName == "")
}

func (rc *ResourceClaimController) syncPod(ctx context.Context, key string) error {
	ns, name := client.SplitKey(key)
	pod, ok := getAs[*api.Pod](rc.pods, ns, name)
	if !ok || pod.DeletionTimestamp != nil || podDone(pod) {
		return nil // its claims are released by their own keys
	}
	var statuses []api.PodResourceClaimStatus
	changed := false
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		if pc.ResourceClaimTemplateName == nil {
			continue
		}
		if cur, ok := api.ClaimName(pod, pc); ok {
			statuses = append(statuses, api.PodResourceClaimStatus{Name: pc.Name, ResourceClaimName: &cur})
			continue
		}
		claimName, err := rc.ensureClaim(ctx, pod, pc)
		if err != nil {
			return err
		}
		statuses = append(statuses, api.PodResourceClaimStatus{Name: pc.Name, ResourceClaimName: &claimName})
		changed = true
	}
	if !changed {
		logReconcile(rc.log, false, podKeyPrefix+key, "claims of the pod's templates exist", "a claim per template entry", "none")
		return nil
	}
	p := api.Clone(pod)
	p.Status.ResourceClaimStatuses = statuses
	if _, err := rc.client.UpdateStatus(ctx, p); err != nil {
		if api.IsNotFound(err) {
			return nil
		}
		return requeueOnConflict(rc.log, key, fmt.Errorf("update status of pod %s: %w", key, err))
	}
	logReconcile(rc.log, true, podKeyPrefix+key, "template entries without a claim", "a claim per template entry", "recorded status.resourceClaimStatuses")
	return nil
}

// ensureClaim returns the claim made for entry pc of pod: an existing one
// (owned by the pod, annotated with the entry) or a new one.
func (rc *ResourceClaimController) ensureClaim(ctx context.Context, pod *api.Pod, pc *api.PodResourceClaim) (string, error) {
	for _, o := range rc.claims.ListBy(nil, pod.Namespace) {
		c := o.(*api.ResourceClaim)
		if api.IsControlledBy(c, pod.UID) && c.Annotations[api.PodResourceClaimAnnotation] == pc.Name {
			return c.Name, nil
		}
	}
	tmpl, ok := getAs[*api.ResourceClaimTemplate](rc.templates, pod.Namespace, *pc.ResourceClaimTemplateName)
	if !ok {
		rc.recorder.Eventf(ctx, pod, api.EventWarning, "FailedResourceClaimCreation", "PodResourceClaim %s: resource claim template %q: %s",
			pc.Name, *pc.ResourceClaimTemplateName, api.NewNotFound(resourceClaimTemplateKind(), *pc.ResourceClaimTemplateName).Error())
		return "", client.RequeueAfter(conflictRetry)
	}
	base := pod.Name + "-" + pc.Name
	if len(base) > generatedClaimBaseMax {
		base = base[:generatedClaimBaseMax]
	}
	ann := map[string]string{}
	for k, v := range tmpl.Spec.Annotations {
		ann[k] = v
	}
	ann[api.PodResourceClaimAnnotation] = pc.Name
	var labels map[string]string
	if len(tmpl.Spec.Labels) > 0 {
		labels = map[string]string{}
		for k, v := range tmpl.Spec.Labels {
			labels[k] = v
		}
	}
	ref := api.NewControllerRef(pod) // controller and blockOwnerDeletion
	ref.APIVersion, ref.Kind = "v1", "Pod"
	claim := &api.ResourceClaim{
		ObjectMeta: api.ObjectMeta{GenerateName: base + "-", Namespace: pod.Namespace, Labels: labels, Annotations: ann, OwnerReferences: []api.OwnerReference{ref}},
		Spec:       tmpl.Spec.Spec,
	}
	created, err := rc.client.Create(ctx, claim)
	if err != nil {
		rc.recorder.Eventf(ctx, pod, api.EventWarning, "FailedResourceClaimCreation", "PodResourceClaim %s: create ResourceClaim: %v", pc.Name, err)
		return "", fmt.Errorf("create claim for pod %s entry %s: %w", api.KeyOf(pod), pc.Name, err)
	}
	logReconcile(rc.log, true, podKeyPrefix+api.KeyOf(pod), "no claim for entry "+pc.Name, "a claim from template "+tmpl.Name, "created resourceclaim "+created.GetObjectMeta().Name)
	return created.GetObjectMeta().Name, nil
}

// consumerLive: the pod the reference names exists (same UID) and is not done.
func (rc *ResourceClaimController) consumerLive(ns string, r api.ResourceClaimConsumerReference) bool {
	if r.APIGroup != "" || r.Resource != "pods" {
		return true // not ours to judge
	}
	p, ok := getAs[*api.Pod](rc.pods, ns, r.Name)
	return ok && p.UID == r.UID && !podDone(p)
}

func (rc *ResourceClaimController) syncClaim(ctx context.Context, key string) error {
	ns, name := client.SplitKey(key)
	claim, ok := getAs[*api.ResourceClaim](rc.claims, ns, name)
	if !ok {
		return nil
	}
	k := claimKeyPrefix + key
	// 1. Consumers that are gone or done leave reservedFor.
	valid := slices.DeleteFunc(slices.Clone(claim.Status.ReservedFor), func(r api.ResourceClaimConsumerReference) bool { return !rc.consumerLive(ns, r) })
	if len(valid) != len(claim.Status.ReservedFor) || (len(valid) == 0 && claim.Status.Allocation != nil) {
		c := api.Clone(claim)
		c.Status.ReservedFor = valid
		action := fmt.Sprintf("removed %d consumers from reservedFor", len(claim.Status.ReservedFor)-len(valid))
		if len(valid) == 0 {
			c.Status.ReservedFor = nil
			c.Status.Allocation = nil // no pod uses it: its devices are free again
			action += ", deallocated"
		}
		if _, err := rc.client.UpdateStatus(ctx, c); err != nil {
			if api.IsNotFound(err) {
				return nil
			}
			return requeueOnConflict(rc.log, key, fmt.Errorf("update status of claim %s: %w", key, err))
		}
		logReconcile(rc.log, true, k, fmt.Sprintf("%d consumers, %d live", len(claim.Status.ReservedFor), len(valid)), "only live consumers; unreserved claims deallocated", action)
		return nil // the update comes back through the informer
	}
	// 2. An unallocated claim needs no protection.
	if claim.Status.Allocation == nil && slices.Contains(claim.Finalizers, api.ResourceClaimFinalizer) {
		c := api.Clone(claim)
		c.Finalizers = slices.DeleteFunc(c.Finalizers, func(f string) bool { return f == api.ResourceClaimFinalizer })
		if _, err := rc.client.Update(ctx, c); err != nil {
			if api.IsNotFound(err) {
				return nil
			}
			return requeueOnConflict(rc.log, key, fmt.Errorf("remove finalizer of claim %s: %w", key, err))
		}
		logReconcile(rc.log, true, k, "unallocated with finalizer", "no finalizer while unallocated", "removed finalizer "+api.ResourceClaimFinalizer)
		return nil
	}
	// 3. A template claim whose pod is done and which no pod reserves goes.
	if ref := api.ControllerOf(claim); ref != nil && ref.Kind == "Pod" && claim.Annotations[api.PodResourceClaimAnnotation] != "" &&
		claim.DeletionTimestamp == nil && len(claim.Status.ReservedFor) == 0 {
		p, ok := getAs[*api.Pod](rc.pods, ns, ref.Name)
		if !ok || p.UID != ref.UID || podDone(p) {
			uid := claim.UID
			err := rc.client.Delete(ctx, resourceClaimKind(), ns, name, api.DeleteOptions{Preconditions: &api.Preconditions{UID: &uid}})
			if err != nil && !api.IsNotFound(err) && !api.IsConflict(err) {
				return fmt.Errorf("delete claim %s: %w", key, err)
			}
			logReconcile(rc.log, true, k, "owner pod done, claim unreserved", "no claim for a finished pod", "deleted resourceclaim "+name)
			return nil
		}
	}
	logReconcile(rc.log, false, k, fmt.Sprintf("%d consumers", len(claim.Status.ReservedFor)), "only live consumers", "none")
	return nil
}
