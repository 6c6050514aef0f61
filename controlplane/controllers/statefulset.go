package controllers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// The StatefulSet controller gives each pod of a StatefulSet a stable
// identity, as Kubernetes' (pkg/controller/statefulset). One reconcile of
// one StatefulSet:
//
//  1. History (history.go): the update revision is the ControllerRevision
//     of the current template; the current revision is the one
//     status.currentRevision names (the pods below the partition keep it).
//     A pod says its revision in the label controller-revision-hash (the
//     revision's name).
//  2. The pods are the set's (controller reference and selector) named
//     SET-ORDINAL: those with an ordinal in [start, start+replicas) are
//     the replicas, the others are condemned.
//  3. Replicas, lowest ordinal first. A missing pod is created, with its
//     PersistentVolumeClaims first (TEMPLATE-SET-ORDINAL, kept across pod
//     lives), at the update revision, or at the current one below the
//     partition. A failed or succeeded pod is deleted (and made again).
//     With OrderedReady (the default) the loop stops at the first pod it
//     created, or that is terminating, not yet Running and Ready, or not
//     yet available: web-1 is made only once web-0 is Ready. With Parallel
//     it goes on.
//  4. Condemned pods, highest ordinal first: with OrderedReady one at a
//     time, each once it and every replica are healthy.
//  5. RollingUpdate: from the highest ordinal down to the partition, the
//     first pod of an old revision is deleted (step 3 makes it again at
//     the update revision); the update waits while a pod it updated is
//     not available. OnDelete updates nothing.
//  6. persistentVolumeClaimRetentionPolicy: a claim is owned by the set
//     (whenDeleted: Delete: deleting the set deletes it) or, once its pod
//     is condemned, by the pod (whenScaled: Delete); Retain owns nothing.
//     The garbage collector does the deleting.
//  7. Status: replicas, ready, available, current and updated replicas,
//     the two revisions; a finished rolling update makes the update
//     revision current. History beyond revisionHistoryLimit goes.
//
// Events are statefulset-controller's: SuccessfulCreate "create Pod web-0
// in StatefulSet web successful", "create Claim www-web-0 Pod web-0 in
// StatefulSet web success", SuccessfulDelete "delete Pod web-1 in
// StatefulSet web successful", and their Failed forms.
type StatefulSetController struct {
	client client.Interface
	ssets  Lister // *api.StatefulSet
	pods   Lister // *api.Pod
	revs   Lister // *api.ControllerRevision
	claims Lister // *api.PersistentVolumeClaim
	events EventRecorder
	log    *slog.Logger
	expect *expectations
	// now is the clock (tests set it).
	now func() time.Time
}

const statefulSetControllerName = "statefulset-controller"

func statefulSetKind() *api.Kind { return api.MustKindOf(&api.StatefulSet{}) }

// NewStatefulSetController returns the controller; the listers are caches
// of all namespaces.
func NewStatefulSetController(c client.Interface, ssets, pods, revs, claims Lister, events EventRecorder, log *slog.Logger) *StatefulSetController {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	indexControllers(pods) // claimCandidates
	if events == nil {
		events = nopRecorder{}
	}
	return &StatefulSetController{client: c, ssets: ssets, pods: pods, revs: revs, claims: claims, events: events,
		log: log.With("controller", statefulSetControllerName), expect: newExpectations(), now: time.Now}
}

// PodHandler enqueues the StatefulSet a pod belongs to, and for an orphan
// the sets whose selector matches it.
func (r *StatefulSetController) PodHandler(enqueue func(key string)) client.Handler {
	return ownedHandler("StatefulSet", enqueue, func(ns string, set labels.Set) []string {
		var keys []string
		for _, ss := range listAs[*api.StatefulSet](r.ssets.ListBy(nil, ns)) {
			if sel, err := ss.Spec.Selector.AsSelector(); err == nil && !sel.Empty() && sel.Matches(set) {
				keys = append(keys, api.KeyOf(ss))
			}
		}
		return keys
	})
}

// RevisionHandler enqueues the StatefulSet of a ControllerRevision.
func (r *StatefulSetController) RevisionHandler(enqueue func(key string)) client.Handler {
	return ownedHandler("StatefulSet", enqueue, func(string, labels.Set) []string { return nil })
}

// stsSync is what one reconcile knows about one StatefulSet.
type stsSync struct {
	set              *api.StatefulSet
	key              string
	current, update  *api.ControllerRevision
	currentTemplate  *api.PodTemplateSpec
	updateTemplate   *api.PodTemplateSpec
	replicas         []*api.Pod // by ordinal-start; a pod with no uid is not created yet
	condemned        []*api.Pod // highest ordinal first
	monotonic        bool
	now              time.Time
	did              []string
	requeue          time.Duration
	status           api.StatefulSetStatus
	firstUnavailable *api.Pod
}

// Reconcile drives the StatefulSet key one step toward its replicas. It
// implements client.Reconciler.
func (r *StatefulSetController) Reconcile(ctx context.Context, key string) error {
	ns, name := client.SplitKey(key)
	set, ok := getAs[*api.StatefulSet](r.ssets, ns, name)
	if !ok {
		r.expect.forget(key)
		logReconcile(r.log, false, key, "gone", "gone", "none")
		return nil
	}
	sel, err := set.Spec.Selector.AsSelector()
	if err != nil || sel.Empty() {
		r.log.Warn("invalid or empty selector; nothing done", "key", key, "err", err)
		return nil
	}
	if set.DeletionTimestamp != nil {
		logReconcile(r.log, false, key, "being deleted", "gone", "none (the garbage collector removes its pods and revisions)")
		return nil
	}
	s, err := r.prepare(ctx, set, sel)
	if err != nil {
		return requeueOnConflict(r.log, "statefulset "+key, err)
	}
	pending := r.expect.pending(key, ns, r.pods, s.now)
	var actErr error
	if pending == 0 {
		actErr = errors.Join(r.act(ctx, s), r.truncate(ctx, s))
	}
	s.computeStatus()
	statusErr := r.writeStatus(ctx, s)
	r.logLine(s, pending)
	if err := errors.Join(actErr, statusErr); err != nil {
		return requeueOnConflict(r.log, "statefulset "+key, err)
	}
	if pending > 0 {
		return client.RequeueAfter(expectationsTTL)
	}
	if s.requeue > 0 {
		return client.RequeueAfter(s.requeue)
	}
	return nil
}

// prepare is steps 1 and 2.
func (r *StatefulSetController) prepare(ctx context.Context, set *api.StatefulSet, sel labels.Selector) (*stsSync, error) {
	key := api.KeyOf(set)
	hist, err := constructHistory(ctx, r.client, set, sel, r.revs, &set.Spec.Template, set.Status.CollisionCount, r.bumpCollision(set))
	if err != nil {
		return nil, fmt.Errorf("statefulset %s: revisions: %w", key, err)
	}
	s := &stsSync{set: set, key: key, update: hist.cur, now: r.now(), monotonic: set.Spec.PodManagementPolicy != api.ParallelPodManagement}
	s.current = s.update
	for _, rev := range hist.old {
		if rev.Name == set.Status.CurrentRevision {
			s.current = rev
		}
	}
	if s.currentTemplate, err = api.TemplateOfRevision(s.current); err != nil {
		return nil, err
	}
	s.updateTemplate = &set.Spec.Template
	all := claimCandidates[*api.Pod](r.pods, set)
	all = slices.DeleteFunc(all, func(p *api.Pod) bool { parent, _ := parentAndOrdinal(p.Name); return parent != set.Name })
	pods, err := claim(ctx, r.client, set, sel, all)
	if err != nil {
		return nil, fmt.Errorf("statefulset %s: claim pods: %w", key, err)
	}
	start, n := startOrdinal(set), int(replicasOf(set.Spec.Replicas))
	s.replicas = make([]*api.Pod, n)
	for _, p := range pods {
		_, ord := parentAndOrdinal(p.Name)
		switch {
		case ord >= start && ord < start+n:
			s.replicas[ord-start] = p
		case ord >= 0:
			s.condemned = append(s.condemned, p)
		}
	}
	slices.SortFunc(s.condemned, func(a, b *api.Pod) int { return ordinalOf(b) - ordinalOf(a) })
	for i := range s.replicas {
		if s.replicas[i] == nil {
			s.replicas[i] = s.newPod(start + i)
		}
	}
	return s, nil
}

// act is steps 3 to 6, and the history's truncation.
func (r *StatefulSetController) act(ctx context.Context, s *stsSync) error {
	for _, p := range s.replicas {
		if s.unavailable(p) && s.firstUnavailable == nil {
			s.firstUnavailable = p
		}
	}
	for i := len(s.condemned) - 1; i >= 0; i-- {
		if s.unavailable(s.condemned[i]) && s.firstUnavailable == nil {
			s.firstUnavailable = s.condemned[i]
		}
	}
	stop, err := r.processReplicas(ctx, s)
	if err != nil || stop {
		return err
	}
	if err := r.fixClaimOwners(ctx, s, s.condemned); err != nil {
		return err
	}
	for _, p := range s.condemned {
		stop, err := r.processCondemned(ctx, s, p)
		if err != nil || (stop && s.monotonic) {
			return err
		}
	}
	if s.set.Spec.UpdateStrategy.Type == api.RollingUpdate {
		return r.rollingUpdate(ctx, s)
	}
	return nil
}

// truncate deletes history beyond revisionHistoryLimit that neither the
// status nor a pod names (Kubernetes' truncateHistory for StatefulSets).
func (r *StatefulSetController) truncate(ctx context.Context, s *stsSync) error {
	live := map[string]bool{s.current.Name: true, s.update.Name: true}
	for _, p := range append(slices.Clone(s.replicas), s.condemned...) {
		live[p.Labels[api.LabelControllerRevisionHash]] = true
	}
	var old []*api.ControllerRevision
	for _, rev := range listAs[*api.ControllerRevision](r.revs.ListBy(nil, s.set.Namespace)) {
		if api.IsControlledBy(rev, s.set.UID) && rev.Name != s.update.Name {
			old = append(old, rev)
		}
	}
	_, err := truncateHistory(ctx, r.client, old, replicasOrDefault(s.set.Spec.RevisionHistoryLimit, api.DefaultRevisionHistoryLimit), false,
		func(rev *api.ControllerRevision) bool { return live[rev.Name] })
	return err
}

// processReplicas is step 3; stop reports an OrderedReady wait.
func (r *StatefulSetController) processReplicas(ctx context.Context, s *stsSync) (bool, error) {
	var errs []error
	for _, p := range s.replicas {
		stop, err := r.processReplica(ctx, s, p)
		if err != nil {
			if s.monotonic {
				return true, err
			}
			errs = append(errs, err)
			continue
		}
		if stop && s.monotonic {
			return true, nil
		}
	}
	return len(errs) > 0, errors.Join(errs...)
}

// processReplica handles one replica (Kubernetes' processReplica); true
// means an OrderedReady set must wait here.
func (r *StatefulSetController) processReplica(ctx context.Context, s *stsSync, p *api.Pod) (bool, error) {
	if created(p) && (p.Status.Phase == api.PodFailed || p.Status.Phase == api.PodSucceeded) {
		if p.DeletionTimestamp == nil {
			return true, r.deletePod(ctx, s, p)
		}
		return true, nil // made again once it is gone
	}
	if !created(p) {
		if stale, err := r.claimIsStale(s, p); err != nil || stale {
			return true, err
		}
		if err := r.createPod(ctx, s, p); err != nil {
			return true, err
		}
		return true, nil // a new pod is never Ready yet
	}
	if p.Status.Phase == api.PodPending {
		if err := r.createClaims(ctx, s, p); err != nil {
			return true, err
		}
	}
	switch {
	case p.DeletionTimestamp != nil, !runningAndReady(p), !s.available(p):
		return true, nil
	}
	if err := r.fixClaimOwners(ctx, s, []*api.Pod{p}); err != nil {
		return true, err
	}
	if p.Labels[api.LabelStatefulSetPodName] != p.Name {
		u := api.Clone(p)
		if u.Labels == nil {
			u.Labels = map[string]string{}
		}
		u.Labels[api.LabelStatefulSetPodName] = p.Name
		if _, err := r.client.Update(ctx, u); err != nil && !api.IsNotFound(err) {
			return true, fmt.Errorf("statefulset %s: label pod %s: %w", s.key, p.Name, err)
		}
	}
	return false, nil
}

// processCondemned deletes one condemned pod (Kubernetes'
// processCondemned); true means an OrderedReady set must wait here.
func (r *StatefulSetController) processCondemned(ctx context.Context, s *stsSync, p *api.Pod) (bool, error) {
	if p.DeletionTimestamp != nil {
		return true, nil
	}
	if s.monotonic && p != s.firstUnavailable && (!runningAndReady(p) || !s.available(p)) {
		return true, nil
	}
	return true, r.deletePod(ctx, s, p)
}

// rollingUpdate is step 5.
func (r *StatefulSetController) rollingUpdate(ctx context.Context, s *stsSync) error {
	updateMin := 0
	if ru := s.set.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		updateMin = int(*ru.Partition) - startOrdinal(s.set)
	}
	for i := len(s.replicas) - 1; i >= max(updateMin, 0); i-- {
		p := s.replicas[i]
		if p.Labels[api.LabelControllerRevisionHash] != s.update.Name && p.DeletionTimestamp == nil {
			return r.deletePod(ctx, s, p)
		}
		if s.unavailable(p) {
			return nil // wait for the pod just updated
		}
	}
	return nil
}

// createPod makes the claims of a pod, then the pod.
func (r *StatefulSetController) createPod(ctx context.Context, s *stsSync, p *api.Pod) error {
	if err := r.createClaims(ctx, s, p); err != nil {
		return err
	}
	if _, err := r.client.Create(ctx, p); err != nil {
		if api.IsAlreadyExists(err) {
			return nil // the cache is behind; the pod event brings us back
		}
		r.events.Eventf(ctx, s.set, api.EventWarning, "FailedCreate", "create Pod %s in StatefulSet %s failed error: %v", p.Name, s.set.Name, err)
		return fmt.Errorf("statefulset %s: create pod %s: %w", s.key, p.Name, err)
	}
	r.expect.expectCreate(s.key, p.Name, s.now)
	r.events.Eventf(ctx, s.set, api.EventNormal, "SuccessfulCreate", "create Pod %s in StatefulSet %s successful", p.Name, s.set.Name)
	s.did = append(s.did, "created pod "+p.Name)
	return nil
}

// deletePod deletes a pod of the set.
func (r *StatefulSetController) deletePod(ctx context.Context, s *stsSync, p *api.Pod) error {
	uid := p.UID
	err := r.client.Delete(ctx, podKind(), p.Namespace, p.Name, api.DeleteOptions{Preconditions: &api.Preconditions{UID: &uid}})
	switch {
	case err == nil:
	case api.IsNotFound(err) || api.IsConflict(err):
		return nil
	default:
		r.events.Eventf(ctx, s.set, api.EventWarning, "FailedDelete", "delete Pod %s in StatefulSet %s failed error: %v", p.Name, s.set.Name, err)
		return fmt.Errorf("statefulset %s: delete pod %s: %w", s.key, p.Name, err)
	}
	r.expect.expectDelete(s.key, p.Name, s.now)
	r.events.Eventf(ctx, s.set, api.EventNormal, "SuccessfulDelete", "delete Pod %s in StatefulSet %s successful", p.Name, s.set.Name)
	s.did = append(s.did, "deleted pod "+p.Name)
	return nil
}

// createClaims makes the pod's missing PersistentVolumeClaims, owned as
// the retention policy says.
func (r *StatefulSetController) createClaims(ctx context.Context, s *stsSync, p *api.Pod) error {
	var errs []error
	for _, c := range claimsFor(s.set, p) {
		if _, ok := r.claims.Get(c.Namespace, c.Name); ok {
			continue
		}
		c.OwnerReferences = claimOwners(nil, s.set, p)
		if _, err := r.client.Create(ctx, c); err != nil && !api.IsAlreadyExists(err) {
			r.events.Eventf(ctx, s.set, api.EventWarning, "FailedCreate", "create Claim %s for Pod %s in StatefulSet %s failed error: %v", c.Name, p.Name, s.set.Name, err)
			errs = append(errs, fmt.Errorf("statefulset %s: create claim %s: %w", s.key, c.Name, err))
			continue
		} else if err == nil {
			r.events.Eventf(ctx, s.set, api.EventNormal, "SuccessfulCreate", "create Claim %s Pod %s in StatefulSet %s success", c.Name, p.Name, s.set.Name)
			s.did = append(s.did, "created claim "+c.Name)
		}
	}
	return errors.Join(errs...)
}

// claimIsStale: with whenScaled Delete, a claim still owned by an earlier
// pod of the same name is on its way out; the pod waits for it
// (Kubernetes' PodClaimIsStale).
func (r *StatefulSetController) claimIsStale(s *stsSync, p *api.Pod) (bool, error) {
	if retention(s.set).WhenScaled == api.RetainPVC {
		return false, nil
	}
	for _, c := range claimsFor(s.set, p) {
		cur, ok := getAs[*api.PersistentVolumeClaim](r.claims, c.Namespace, c.Name)
		if !ok {
			continue
		}
		for _, ref := range cur.OwnerReferences {
			if ref.Kind == "Pod" && ref.Name == p.Name && ref.UID != p.UID {
				return true, nil
			}
		}
	}
	return false, nil
}

// fixClaimOwners sets the owner references of pods' claims to what the
// retention policy says (step 6).
func (r *StatefulSetController) fixClaimOwners(ctx context.Context, s *stsSync, pods []*api.Pod) error {
	var errs []error
	for _, p := range pods {
		if !created(p) {
			continue
		}
		for _, want := range claimsFor(s.set, p) {
			cur, ok := getAs[*api.PersistentVolumeClaim](r.claims, want.Namespace, want.Name)
			if !ok || cur.DeletionTimestamp != nil {
				continue
			}
			refs := claimOwners(cur.OwnerReferences, s.set, p)
			if slices.EqualFunc(refs, cur.OwnerReferences, func(a, b api.OwnerReference) bool { return a.UID == b.UID }) {
				continue
			}
			u := api.Clone(cur)
			u.OwnerReferences = refs
			if _, err := r.client.Update(ctx, u); err != nil && !api.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("statefulset %s: owners of claim %s: %w", s.key, cur.Name, err))
				continue
			}
			s.did = append(s.did, "claim "+cur.Name+" owned per retention policy")
		}
	}
	return errors.Join(errs...)
}

// claimOwners is refs with the set's and the pod's references replaced by
// what the retention policy wants (Kubernetes' updateClaimOwnerRefForSetAndPod):
// whenDeleted Delete → the set (while the pod is a replica); whenScaled
// Delete → the pod (once it is condemned). Another controller's claim is
// left alone.
func claimOwners(refs []api.OwnerReference, set *api.StatefulSet, p *api.Pod) []api.OwnerReference {
	for _, ref := range refs {
		if ref.Controller != nil && *ref.Controller && ref.UID != set.UID && ref.UID != p.UID && !(ref.Kind == "Pod" && ref.Name == p.Name) {
			return refs
		}
	}
	out := slices.DeleteFunc(slices.Clone(refs), func(ref api.OwnerReference) bool {
		return (ref.Kind == "StatefulSet" && ref.Name == set.Name) || (ref.Kind == "Pod" && ref.Name == p.Name)
	})
	pol := retention(set)
	inRange := ordinalInRange(set, ordinalOf(p))
	if pol.WhenDeleted == api.DeletePVC && inRange {
		out = append(out, controllerRef(set))
	}
	if pol.WhenScaled == api.DeletePVC && !inRange && p.UID != "" {
		ref := api.NewControllerRef(p)
		ref.APIVersion, ref.Kind = "v1", "Pod"
		out = append(out, ref)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func retention(set *api.StatefulSet) api.StatefulSetPersistentVolumeClaimRetentionPolicy {
	p := api.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: api.RetainPVC, WhenScaled: api.RetainPVC}
	if set.Spec.PersistentVolumeClaimRetentionPolicy != nil {
		p = *set.Spec.PersistentVolumeClaimRetentionPolicy
	}
	return p
}

// claimsFor are the claims of pod p of set, from the claim templates:
// named TEMPLATE-SET-ORDINAL, labelled with the template's labels and the
// set's selector labels.
func claimsFor(set *api.StatefulSet, p *api.Pod) []*api.PersistentVolumeClaim {
	ord := ordinalOf(p)
	var out []*api.PersistentVolumeClaim
	for i := range set.Spec.VolumeClaimTemplates {
		c := api.Clone(&set.Spec.VolumeClaimTemplates[i])
		c.Name = ClaimName(set, c.Name, ord)
		c.Namespace = set.Namespace
		if c.Labels == nil {
			c.Labels = map[string]string{}
		}
		maps.Copy(c.Labels, set.Spec.Selector.MatchLabels)
		c.Status = api.PersistentVolumeClaimStatus{}
		api.SetTypeMeta(c)
		out = append(out, c)
	}
	return out
}

// ClaimName is the claim of template for the pod of ordinal: TEMPLATE-SET-ORDINAL.
func ClaimName(set *api.StatefulSet, template string, ordinal int) string {
	return fmt.Sprintf("%s-%s-%d", template, set.Name, ordinal)
}

// newPod is the pod of ordinal at the revision it should have (Kubernetes'
// newVersionedStatefulSetPod): the current revision below the partition,
// the update revision from it on. It is not created (no uid).
func (s *stsSync) newPod(ordinal int) *api.Pod {
	set, ru := s.set, s.set.Spec.UpdateStrategy.RollingUpdate
	start := startOrdinal(set)
	useCurrent := (set.Spec.UpdateStrategy.Type == api.RollingUpdate && ru == nil && ordinal < start+int(set.Status.CurrentReplicas)) ||
		(ru != nil && ru.Partition != nil && ordinal < start+int(*ru.Partition))
	t, rev := s.updateTemplate, s.update
	if useCurrent {
		t, rev = s.currentTemplate, s.current
	}
	return NewStatefulSetPod(set, t, rev.Name, ordinal)
}

// NewStatefulSetPod is pod ordinal of set from template t at revision rev:
// named SET-ORDINAL, hostname the same and subdomain the set's service,
// labelled with its name, ordinal and revision, mounting its claims.
func NewStatefulSetPod(set *api.StatefulSet, t *api.PodTemplateSpec, rev string, ordinal int) *api.Pod {
	tc := api.Clone(&api.StatefulSet{Spec: api.StatefulSetSpec{Template: *t}}).Spec.Template
	name := fmt.Sprintf("%s-%d", set.Name, ordinal)
	p := &api.Pod{ObjectMeta: tc.ObjectMeta, Spec: tc.Spec}
	p.Name, p.Namespace, p.GenerateName = name, set.Namespace, ""
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[api.LabelStatefulSetPodName] = name
	p.Labels[api.LabelPodIndex] = strconv.Itoa(ordinal)
	p.Labels[api.LabelControllerRevisionHash] = rev
	p.OwnerReferences = []api.OwnerReference{controllerRef(set)}
	p.Spec.Hostname, p.Spec.Subdomain = name, set.Spec.ServiceName
	var claimVols []api.Volume
	for _, c := range set.Spec.VolumeClaimTemplates {
		claimVols = append(claimVols, api.Volume{Name: c.Name, PersistentVolumeClaim: &api.PersistentVolumeClaimVolumeSource{ClaimName: ClaimName(set, c.Name, ordinal)}})
	}
	p.Spec.Volumes = append(claimVols, slices.DeleteFunc(p.Spec.Volumes, func(v api.Volume) bool {
		return slices.ContainsFunc(claimVols, func(c api.Volume) bool { return c.Name == v.Name })
	})...)
	api.SetTypeMeta(p)
	return p
}

// computeStatus is step 7's counting (Kubernetes' updateStatus and
// completeRollingUpdate).
func (s *stsSync) computeStatus() {
	st := api.StatefulSetStatus{
		ObservedGeneration: s.set.Generation,
		CurrentRevision:    s.current.Name,
		UpdateRevision:     s.update.Name,
		CollisionCount:     s.set.Status.CollisionCount,
		Conditions:         s.set.Status.Conditions,
	}
	for _, p := range append(slices.Clone(s.replicas), s.condemned...) {
		if !created(p) {
			continue
		}
		st.Replicas++
		if runningAndReady(p) {
			st.ReadyReplicas++
			if s.available(p) {
				st.AvailableReplicas++
			}
		}
		if p.DeletionTimestamp == nil {
			switch p.Labels[api.LabelControllerRevisionHash] {
			case s.current.Name:
				st.CurrentReplicas++
			}
			if p.Labels[api.LabelControllerRevisionHash] == s.update.Name {
				st.UpdatedReplicas++
			}
		}
	}
	want := replicasOf(s.set.Spec.Replicas)
	if s.set.Spec.UpdateStrategy.Type == api.RollingUpdate && st.UpdatedReplicas == want && st.ReadyReplicas == want && st.Replicas == want {
		st.CurrentReplicas, st.CurrentRevision = st.UpdatedReplicas, st.UpdateRevision
	}
	s.status = st
}

func (r *StatefulSetController) writeStatus(ctx context.Context, s *stsSync) error {
	if reflect.DeepEqual(s.set.Status, s.status) {
		return nil
	}
	u := api.Clone(s.set)
	u.Status = s.status
	if _, err := r.client.UpdateStatus(ctx, u); err != nil && !api.IsNotFound(err) {
		return fmt.Errorf("statefulset %s: update status: %w", s.key, err)
	}
	return nil
}

func (r *StatefulSetController) bumpCollision(set *api.StatefulSet) func(context.Context) error {
	return func(ctx context.Context) error {
		cur, err := client.Get[*api.StatefulSet](ctx, r.client, set.Namespace, set.Name)
		if err != nil {
			return err
		}
		n := int32(1)
		if cur.Status.CollisionCount != nil {
			n = *cur.Status.CollisionCount + 1
		}
		cur.Status.CollisionCount = &n
		_, err = r.client.UpdateStatus(ctx, cur)
		return err
	}
}

func (r *StatefulSetController) logLine(s *stsSync, pending int) {
	st := s.status
	observed := fmt.Sprintf("%s (%d ready, %d at revision %s)", plural(int(st.Replicas), "pod"), st.ReadyReplicas, st.UpdatedReplicas, s.update.Name)
	desired := fmt.Sprintf("%d, %s", replicasOf(s.set.Spec.Replicas), s.set.Spec.PodManagementPolicy)
	action := "none"
	switch {
	case pending > 0:
		action = fmt.Sprintf("none (waiting for the cache to show %s we created or deleted)", plural(pending, "pod"))
	case len(s.did) > 0:
		action = strings.Join(s.did, ", ")
	case s.firstUnavailable != nil && s.monotonic:
		action = "none (waiting for " + s.firstUnavailable.Name + " to be Running and Ready)"
	}
	logReconcile(r.log, len(s.did) > 0, s.key, observed, desired, action)
}

// available: ready for minReadySeconds (a soon-available pod brings the
// reconcile back then).
func (s *stsSync) available(p *api.Pod) bool {
	if !runningAndReady(p) {
		return false
	}
	wait := untilAvailable(p, time.Duration(s.set.Spec.MinReadySeconds)*time.Second, s.now)
	if wait > 0 && (s.requeue == 0 || wait < s.requeue) {
		s.requeue = wait
	}
	return wait == 0
}

// unavailable: not created, terminating, or not available.
func (s *stsSync) unavailable(p *api.Pod) bool {
	return !created(p) || p.DeletionTimestamp != nil || !s.available(p)
}

// created: the pod exists in the API (a pod made by newPod has no uid yet).
func created(p *api.Pod) bool { return p.UID != "" }

func runningAndReady(p *api.Pod) bool { return p.Status.Phase == api.PodRunning && isPodReady(p) }

var statefulPodName = regexp.MustCompile(`^(.*)-([0-9]+)$`)

// parentAndOrdinal splits SET-ORDINAL; ordinal -1 when the name has none.
func parentAndOrdinal(name string) (string, int) {
	m := statefulPodName.FindStringSubmatch(name)
	if m == nil {
		return "", -1
	}
	ord, err := strconv.ParseInt(m[2], 10, 32)
	if err != nil {
		return m[1], -1
	}
	return m[1], int(ord)
}

func ordinalOf(p *api.Pod) int { _, o := parentAndOrdinal(p.Name); return o }

func startOrdinal(set *api.StatefulSet) int {
	if set.Spec.Ordinals != nil {
		return int(set.Spec.Ordinals.Start)
	}
	return 0
}

func ordinalInRange(set *api.StatefulSet, ord int) bool {
	start := startOrdinal(set)
	return ord >= start && ord < start+int(replicasOf(set.Spec.Replicas))
}
