package controllers

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// The persistent volume controller binds claims to volumes, as
// kube-controller-manager's (pkg/controller/volume/persistentvolume,
// "persistentvolume-controller" in events). Two loops over one state:
//
// A claim (key namespace/name):
//
//	no class named and a default class exists → fill it in (retroactive default)
//	unbound, a volume fits                    → bind (below)
//	unbound, WaitForFirstConsumer, no node    → Pending, event WaitForFirstConsumer
//	unbound, its class has a provisioner      → annotate volume.kubernetes.io/storage-provisioner,
//	                                            event ExternalProvisioning (the provisioner makes a volume
//	                                            whose claimRef is the claim; the next sync binds it)
//	unbound, no class                         → Pending, event FailedBinding
//	spec.volumeName set                       → finish that binding, or say why not
//	its bound volume gone                     → Lost, event ClaimLost
//
// A volume (key name):
//
//	no claimRef                               → Available
//	claimRef to a claim bound to it           → Bound
//	claimRef to a claim that is gone          → Released; then by its reclaim policy:
//	                                            Retain keeps it (and its data);
//	                                            Delete is its provisioner's to do (agent/localpath);
//	                                            a volume no provisioner made cannot be deleted: Failed
//	claimRef to a claim not (yet) bound       → the claim's loop binds it
//
// Binding, in the order that survives a crash at any step: the volume's
// claimRef (annotated bound-by-controller when the controller chose it),
// the volume's phase Bound, the claim's spec.volumeName (annotated
// bind-completed), the claim's status (Bound, the volume's capacity and
// access modes). A volume "fits" a claim when its class, access modes,
// volume mode, size and the claim's selector allow it; the smallest such
// volume wins. With WaitForFirstConsumer only a volume the scheduler
// reserved for the claim (claimRef set by its VolumeBinding plugin) is
// bound: the scheduler chose it for the pod's node.
type PersistentVolumeController struct {
	client  client.Interface
	claims  Lister // *api.PersistentVolumeClaim
	volumes Lister // *api.PersistentVolume
	classes Lister // *api.StorageClass
	events  EventRecorder
	log     *slog.Logger
}

const persistentVolumeControllerName = "persistentvolume-controller"

func storageClassKind() *api.Kind { return api.MustKindOf(&api.StorageClass{}) }

// Events the controller writes, Kubernetes' reasons and messages.
const (
	msgWaitForFirstConsumer = "waiting for first consumer to be created before binding"
	msgNoVolumeNoClass      = "no persistent volumes available for this claim and no storage class is set"
	msgExternalProvisioning = "Waiting for a volume to be created either by the external provisioner '%s' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered."
	msgClaimLost            = "Bound claim has lost its PersistentVolume. Data on the volume is lost!"
)

// NewPersistentVolumeController returns the controller over caches of
// claims, volumes and storage classes.
func NewPersistentVolumeController(c client.Interface, claims, volumes, classes Lister, events EventRecorder, log *slog.Logger) *PersistentVolumeController {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if events == nil {
		events = nopRecorder{}
	}
	return &PersistentVolumeController{client: c, claims: claims, volumes: volumes, classes: classes, events: events,
		log: log.With("controller", persistentVolumeControllerName)}
}

// VolumeHandler enqueues, for a volume that changed, the claim its
// claimRef names (the claim's loop finishes bindings).
func (p *PersistentVolumeController) VolumeHandler(enqueueClaim func(key string)) client.Handler {
	f := func(o api.Object) {
		if pv, ok := o.(*api.PersistentVolume); ok && pv.Spec.ClaimRef != nil {
			enqueueClaim(api.Key(pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name))
		}
	}
	return client.Handler{OnAdd: f, OnUpdate: func(_, n api.Object) { f(n) }, OnDelete: f}
}

// ClaimHandler enqueues, for a claim that changed or went away, the volume
// it is bound to and every volume whose claimRef names it (they may be
// Released now).
func (p *PersistentVolumeController) ClaimHandler(enqueueVolume func(key string)) client.Handler {
	f := func(o api.Object) {
		c, ok := o.(*api.PersistentVolumeClaim)
		if !ok {
			return
		}
		if c.Spec.VolumeName != "" {
			enqueueVolume(c.Spec.VolumeName)
		}
		for _, pv := range p.volumesFor(c.Namespace, c.Name) {
			enqueueVolume(pv.Name)
		}
	}
	return client.Handler{OnAdd: f, OnUpdate: func(_, n api.Object) { f(n) }, OnDelete: f}
}

// ClassHandler enqueues every unbound claim when a class changes (a new
// default class, a class that now exists).
func (p *PersistentVolumeController) ClassHandler(enqueueClaim func(key string)) client.Handler {
	f := func(api.Object) {
		for _, c := range listAs[*api.PersistentVolumeClaim](p.claims.ListBy(nil, "")) {
			if c.Spec.VolumeName == "" {
				enqueueClaim(api.KeyOf(c))
			}
		}
	}
	return client.Handler{OnAdd: f, OnUpdate: func(_, n api.Object) { f(n) }, OnDelete: f}
}

// volumesFor lists the volumes whose claimRef names namespace/name.
func (p *PersistentVolumeController) volumesFor(namespace, name string) []*api.PersistentVolume {
	var out []*api.PersistentVolume
	for _, pv := range listAs[*api.PersistentVolume](p.volumes.ListBy(nil, "")) {
		if r := pv.Spec.ClaimRef; r != nil && r.Namespace == namespace && r.Name == name {
			out = append(out, pv)
		}
	}
	return out
}

// ReconcileClaim syncs one claim (its loop's Reconciler).
func (p *PersistentVolumeController) ReconcileClaim(ctx context.Context, key string) error {
	ns, name := splitKey(key)
	c, ok := getAs[*api.PersistentVolumeClaim](p.claims, ns, name)
	if !ok || c.DeletionTimestamp != nil {
		logReconcile(p.log, false, key, "gone or being deleted", "nothing", "none")
		return nil
	}
	var err error
	if c.Spec.VolumeName == "" {
		err = p.syncUnboundClaim(ctx, key, c)
	} else {
		err = p.syncBoundClaim(ctx, key, c)
	}
	return requeueOnConflict(p.log, key, err)
}

func (p *PersistentVolumeController) syncUnboundClaim(ctx context.Context, key string, c *api.PersistentVolumeClaim) error {
	_, beta := c.Annotations[api.AnnotationBetaStorageClass]
	if c.Spec.StorageClassName == nil && !beta {
		if def := api.DefaultClass(listAs[*api.StorageClass](p.classes.ListBy(nil, ""))); def != nil {
			u := api.Clone(c)
			u.Spec.StorageClassName = &def.Name
			if _, err := p.client.Update(ctx, u); err != nil {
				return fmt.Errorf("set the default class of %s: %w", key, err)
			}
			logReconcile(p.log, true, key, "no class", "class "+def.Name, "set the default class")
			return nil
		}
	}
	className := api.ClaimClass(c)
	sc, _ := getAs[*api.StorageClass](p.classes, "", className)
	delayed := className != "" && api.BindingMode(sc) == api.VolumeBindingWaitForFirstConsumer
	if pv := bestVolume(c, listAs[*api.PersistentVolume](p.volumes.ListBy(nil, "")), delayed); pv != nil {
		return p.bind(ctx, key, c, pv)
	}
	_, selected := c.Annotations[api.AnnotationSelectedNode]
	switch {
	case delayed && !selected:
		p.events.Eventf(ctx, c, api.EventNormal, "WaitForFirstConsumer", msgWaitForFirstConsumer)
		logReconcile(p.log, false, key, "unbound, "+api.VolumeBindingWaitForFirstConsumer, "a pod's node first", "event WaitForFirstConsumer")
	case className == "":
		p.events.Eventf(ctx, c, api.EventWarning, "FailedBinding", msgNoVolumeNoClass)
		logReconcile(p.log, false, key, "unbound, no class", "a volume", "event FailedBinding")
	case sc == nil:
		p.events.Eventf(ctx, c, api.EventWarning, "ProvisioningFailed", "storageclass.storage.k8s.io %q not found", className)
		logReconcile(p.log, false, key, "unbound, class "+className+" missing", "a volume", "event ProvisioningFailed")
	case sc.Provisioner == api.NoProvisioner:
		p.events.Eventf(ctx, c, api.EventWarning, "ProvisioningFailed", "no volume plugin matched name: %s", sc.Provisioner)
		logReconcile(p.log, false, key, "unbound, class "+className+" provisions nothing", "a volume", "event ProvisioningFailed")
	default:
		return p.askProvisioner(ctx, key, c, sc.Provisioner)
	}
	return nil
}

// askProvisioner marks the claim for its class's provisioner and says so.
func (p *PersistentVolumeController) askProvisioner(ctx context.Context, key string, c *api.PersistentVolumeClaim, provisioner string) error {
	if c.Annotations[api.AnnotationStorageProvisioner] != provisioner || c.Annotations[api.AnnotationBetaStorageProvisioner] != provisioner {
		u := api.Clone(c)
		u.Annotations = maps.Clone(u.Annotations)
		if u.Annotations == nil {
			u.Annotations = map[string]string{}
		}
		u.Annotations[api.AnnotationStorageProvisioner] = provisioner
		u.Annotations[api.AnnotationBetaStorageProvisioner] = provisioner
		if _, err := p.client.Update(ctx, u); err != nil {
			return fmt.Errorf("annotate %s for provisioner %s: %w", key, provisioner, err)
		}
	}
	p.events.Eventf(ctx, c, api.EventNormal, "ExternalProvisioning", msgExternalProvisioning, provisioner)
	logReconcile(p.log, true, key, "unbound", "a volume from "+provisioner, "event ExternalProvisioning")
	return nil
}

// syncBoundClaim finishes or checks the binding spec.volumeName names.
func (p *PersistentVolumeController) syncBoundClaim(ctx context.Context, key string, c *api.PersistentVolumeClaim) error {
	pv, ok := getAs[*api.PersistentVolume](p.volumes, "", c.Spec.VolumeName)
	switch {
	case !ok && c.Status.Phase == api.ClaimLost:
		logReconcile(p.log, false, key, "Lost", "Lost", "none")
		return nil
	case !ok && c.Status.Phase == api.ClaimBound:
		p.events.Eventf(ctx, c, api.EventWarning, "ClaimLost", msgClaimLost)
		logReconcile(p.log, true, key, "Bound, volume "+c.Spec.VolumeName+" gone", "Lost", "status Lost")
		return p.setClaimStatus(ctx, c, api.ClaimLost, nil)
	case !ok:
		logReconcile(p.log, false, key, "asks for volume "+c.Spec.VolumeName+", not there", "wait for it", "none")
		return p.setClaimStatus(ctx, c, api.ClaimPending, nil)
	case pv.Spec.ClaimRef == nil:
		if why := fits(pv, c); why != "" {
			p.events.Eventf(ctx, c, api.EventWarning, "FailedBinding", "Cannot bind to requested volume %q: %s", pv.Name, why)
			logReconcile(p.log, false, key, "asks for volume "+pv.Name, "bound", "event FailedBinding: "+why)
			return p.setClaimStatus(ctx, c, api.ClaimPending, nil)
		}
		return p.bind(ctx, key, c, pv)
	case claimRefIs(pv.Spec.ClaimRef, c):
		return p.bind(ctx, key, c, pv)
	}
	p.events.Eventf(ctx, c, api.EventWarning, "FailedBinding", "volume %q already bound to a different claim.", pv.Name)
	logReconcile(p.log, false, key, "asks for volume "+pv.Name+", bound elsewhere", "bound", "event FailedBinding")
	return p.setClaimStatus(ctx, c, api.ClaimPending, nil)
}

// claimRefIs reports whether ref names claim (the same uid, or none yet:
// a volume pre-bound by name).
func claimRefIs(ref *api.ObjectReference, c *api.PersistentVolumeClaim) bool {
	return ref != nil && ref.Namespace == c.Namespace && ref.Name == c.Name && (ref.UID == "" || ref.UID == c.UID)
}

// bind writes both halves of a binding, skipping what is already written.
func (p *PersistentVolumeController) bind(ctx context.Context, key string, c *api.PersistentVolumeClaim, pv *api.PersistentVolume) error {
	acted := false
	if r := pv.Spec.ClaimRef; r == nil || r.UID != c.UID {
		u := api.Clone(pv)
		if r == nil {
			setAnnotation(&u.ObjectMeta, api.AnnotationBoundByController, "yes")
		}
		u.Spec.ClaimRef = &api.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: c.Namespace, Name: c.Name, UID: c.UID, ResourceVersion: c.ResourceVersion}
		out, err := p.client.Update(ctx, u)
		if err != nil {
			return fmt.Errorf("bind volume %s to claim %s: %w", pv.Name, key, err)
		}
		pv, acted = out.(*api.PersistentVolume), true
	}
	if pv.Status.Phase != api.VolumeBound {
		if err := p.setVolumePhase(ctx, pv, api.VolumeBound, ""); err != nil {
			return err
		}
		acted = true
	}
	if c.Spec.VolumeName != pv.Name || c.Annotations[api.AnnotationBindCompleted] != "yes" {
		u := api.Clone(c)
		if u.Spec.VolumeName == "" {
			setAnnotation(&u.ObjectMeta, api.AnnotationBoundByController, "yes")
		}
		setAnnotation(&u.ObjectMeta, api.AnnotationBindCompleted, "yes")
		u.Spec.VolumeName = pv.Name
		out, err := p.client.Update(ctx, u)
		if err != nil {
			return fmt.Errorf("bind claim %s to volume %s: %w", key, pv.Name, err)
		}
		c, acted = out.(*api.PersistentVolumeClaim), true
	}
	if c.Status.Phase != api.ClaimBound || !quantitiesEqual(c.Status.Capacity, pv.Spec.Capacity) {
		if err := p.setClaimStatus(ctx, c, api.ClaimBound, pv); err != nil {
			return err
		}
		acted = true
	}
	logReconcile(p.log, acted, key, "volume "+pv.Name+" fits", "Bound", map[bool]string{true: "bound to volume " + pv.Name, false: "none"}[acted])
	return nil
}

// setClaimStatus writes the claim's phase and, for Bound, the volume's
// capacity and access modes.
func (p *PersistentVolumeController) setClaimStatus(ctx context.Context, c *api.PersistentVolumeClaim, phase string, pv *api.PersistentVolume) error {
	st := api.PersistentVolumeClaimStatus{Phase: phase, Conditions: c.Status.Conditions}
	if pv != nil {
		st.Capacity, st.AccessModes = maps.Clone(pv.Spec.Capacity), append([]string(nil), pv.Spec.AccessModes...)
	}
	if c.Status.Phase == st.Phase && quantitiesEqual(c.Status.Capacity, st.Capacity) && slices.Equal(c.Status.AccessModes, st.AccessModes) {
		return nil
	}
	u := api.Clone(c)
	u.Status = st
	if _, err := p.client.UpdateStatus(ctx, u); err != nil && !api.IsNotFound(err) {
		return fmt.Errorf("update claim %s status: %w", api.KeyOf(c), err)
	}
	return nil
}

func (p *PersistentVolumeController) setVolumePhase(ctx context.Context, pv *api.PersistentVolume, phase, message string) error {
	if pv.Status.Phase == phase && pv.Status.Message == message {
		return nil
	}
	u := api.Clone(pv)
	now := api.Now()
	u.Status = api.PersistentVolumeStatus{Phase: phase, Message: message, LastPhaseTransitionTime: &now}
	if phase == api.VolumeFailed {
		u.Status.Reason = "VolumeFailedDelete"
	}
	if _, err := p.client.UpdateStatus(ctx, u); err != nil && !api.IsNotFound(err) {
		return fmt.Errorf("update volume %s status: %w", pv.Name, err)
	}
	return nil
}

func setAnnotation(m *api.ObjectMeta, k, v string) {
	m.Annotations = maps.Clone(m.Annotations)
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[k] = v
}

// ReconcileVolume syncs one volume (its loop's Reconciler).
func (p *PersistentVolumeController) ReconcileVolume(ctx context.Context, name string) error {
	pv, ok := getAs[*api.PersistentVolume](p.volumes, "", name)
	if !ok {
		logReconcile(p.log, false, name, "gone", "nothing", "none")
		return nil
	}
	return requeueOnConflict(p.log, name, p.syncVolume(ctx, pv))
}

func (p *PersistentVolumeController) syncVolume(ctx context.Context, pv *api.PersistentVolume) error {
	r := pv.Spec.ClaimRef
	if r == nil {
		logReconcile(p.log, pv.Status.Phase != api.VolumeAvailable, pv.Name, pv.Status.Phase+", no claim", api.VolumeAvailable, "status "+api.VolumeAvailable)
		return p.setVolumePhase(ctx, pv, api.VolumeAvailable, "")
	}
	c, found := getAs[*api.PersistentVolumeClaim](p.claims, r.Namespace, r.Name)
	if found && r.UID != "" && c.UID != r.UID {
		found = false // a new claim of the same name: the old one is gone
	}
	if !found && r.UID != "" {
		// Ask the API: the cache may not have the claim yet.
		o, err := p.client.Get(ctx, claimKind(), r.Namespace, r.Name)
		if err != nil && !api.IsNotFound(err) {
			return fmt.Errorf("get claim %s/%s: %w", r.Namespace, r.Name, err)
		}
		if err == nil && o.GetObjectMeta().UID == r.UID {
			return nil // there after all: its loop binds it
		}
		return p.release(ctx, pv)
	}
	switch {
	case !found || c.Spec.VolumeName == "":
		// Pre-bound by name, or the claim's loop has not finished binding.
		if pv.Status.Phase == api.VolumeBound {
			return nil
		}
		logReconcile(p.log, pv.Status.Phase != api.VolumeAvailable, pv.Name, "reserved for claim "+r.Namespace+"/"+r.Name, api.VolumeAvailable, "status "+api.VolumeAvailable)
		return p.setVolumePhase(ctx, pv, api.VolumeAvailable, "")
	case c.Spec.VolumeName == pv.Name:
		logReconcile(p.log, pv.Status.Phase != api.VolumeBound, pv.Name, "claim "+api.KeyOf(c)+" bound to it", api.VolumeBound, "status "+api.VolumeBound)
		return p.setVolumePhase(ctx, pv, api.VolumeBound, "")
	case pv.Annotations[api.AnnotationBoundByController] == "yes":
		// The claim went to another volume: this one is free again.
		u := api.Clone(pv)
		u.Spec.ClaimRef = nil
		delete(u.Annotations, api.AnnotationBoundByController)
		if _, err := p.client.Update(ctx, u); err != nil {
			return fmt.Errorf("unbind volume %s: %w", pv.Name, err)
		}
		logReconcile(p.log, true, pv.Name, "claim "+api.KeyOf(c)+" bound elsewhere", api.VolumeAvailable, "removed claimRef")
		return nil
	}
	return p.setVolumePhase(ctx, pv, api.VolumeAvailable, "")
}

// release marks a volume whose claim is gone Released and applies its
// reclaim policy: Retain keeps it; Delete is its provisioner's job; a
// volume no provisioner made cannot be deleted by skiff (Failed).
func (p *PersistentVolumeController) release(ctx context.Context, pv *api.PersistentVolume) error {
	_, provisioned := pv.Annotations[api.AnnotationProvisionedBy]
	if pv.Spec.PersistentVolumeReclaimPolicy == api.ReclaimDelete && !provisioned {
		if pv.Status.Phase != api.VolumeFailed {
			msg := fmt.Sprintf("error getting deleter volume plugin for volume %q: no deletable volume plugin matched", pv.Name)
			p.events.Eventf(ctx, pv, api.EventWarning, "VolumeFailedDelete", "%s", msg)
			logReconcile(p.log, true, pv.Name, "claim gone, reclaim Delete, made by hand", api.VolumeFailed, "status Failed")
			return p.setVolumePhase(ctx, pv, api.VolumeFailed, msg)
		}
		return nil
	}
	logReconcile(p.log, pv.Status.Phase != api.VolumeReleased, pv.Name, "claim "+pv.Spec.ClaimRef.Namespace+"/"+pv.Spec.ClaimRef.Name+" gone",
		api.VolumeReleased+" ("+pv.Spec.PersistentVolumeReclaimPolicy+")", "status "+api.VolumeReleased)
	return p.setVolumePhase(ctx, pv, api.VolumeReleased, "")
}
