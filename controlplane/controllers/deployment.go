package controllers

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// The Deployment controller rolls pods from one template to the next
// through ReplicaSets. It never creates pods itself: it creates one
// ReplicaSet per pod template and changes their replicas, and the
// ReplicaSet controller does the rest.
//
//   - The ReplicaSet of a template is named <deployment>-<hash of the
//     template>, and the hash is also a label (pod-template-hash) on its
//     selector and pods, so the ReplicaSets of one Deployment never fight
//     over pods. The ReplicaSet whose template equals the Deployment's is
//     the "new" one; all others are "old".
//   - Each ReplicaSet carries a revision annotation. A new ReplicaSet gets
//     the highest revision plus one; so does an old one that becomes new
//     again (rollout undo copies an old template back into the Deployment).
//     `rollout restart` changes a template annotation, so it is a new
//     template like any other.
//   - RollingUpdate moves pods in steps: scale the new ReplicaSet up while
//     the total stays within replicas+maxSurge, scale the old ones down
//     while the available pods stay at least replicas-maxUnavailable.
//   - Recreate scales every old ReplicaSet to 0, waits until their pods
//     are gone, then scales the new one up.
//   - A paused Deployment does not roll: no new ReplicaSet is created.
//   - Old ReplicaSets at 0 replicas beyond revisionHistoryLimit are deleted.
//   - Status sums the ReplicaSets' status, with the conditions Available
//     and Progressing, as Kubernetes words them.
type DeploymentController struct {
	client  client.Interface
	deploys Lister // *api.Deployment
	rsets   Lister // *api.ReplicaSet
	pods    Lister // *api.Pod
	events  EventRecorder
	log     *slog.Logger
	// now is the clock (tests set it).
	now func() time.Time
}

// NewDeploymentController returns the controller; the listers are caches
// of all namespaces.
func NewDeploymentController(c client.Interface, deploys, rsets, pods Lister, events EventRecorder, log *slog.Logger) *DeploymentController {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if events == nil {
		events = nopRecorder{}
	}
	return &DeploymentController{
		client:  c,
		deploys: deploys,
		rsets:   rsets,
		pods:    pods,
		events:  events,
		log:     log.With("controller", deploymentControllerName),
		now:     time.Now,
	}
}

// ReplicaSetHandler enqueues the Deployment a ReplicaSet change concerns:
// its controller, or for an orphan every Deployment whose selector
// matches it. It only enqueues keys (STYLE 7).
func (d *DeploymentController) ReplicaSetHandler(enqueue func(key string)) client.Handler {
	h := func(obj api.Object) {
		ns := obj.GetObjectMeta().Namespace
		if ref := api.ControllerOf(obj); ref != nil {
			if ref.Kind == "Deployment" {
				enqueue(api.Key(ns, ref.Name))
			}
			return
		}
		set := labels.Set(obj.GetObjectMeta().Labels)
		for _, dep := range listAs[*api.Deployment](d.deploys.ListBy(nil, ns)) {
			if sel, err := dep.Spec.Selector.AsSelector(); err == nil && !sel.Empty() && sel.Matches(set) {
				enqueue(api.KeyOf(dep))
			}
		}
	}
	return client.Handler{
		OnAdd: h,
		OnUpdate: func(old, cur api.Object) {
			h(cur)
			if ref := api.ControllerOf(old); ref != nil && ref.Kind == "Deployment" {
				enqueue(api.Key(old.GetObjectMeta().Namespace, ref.Name))
			}
		},
		OnDelete: h,
	}
}

// PodHandler enqueues the Deployment of a pod that went away or finished
// (pod → its ReplicaSet → its Deployment): a Recreate rollout waits for
// the old pods to be gone.
func (d *DeploymentController) PodHandler(enqueue func(key string)) client.Handler {
	h := func(obj api.Object) {
		ref := api.ControllerOf(obj)
		if ref == nil || ref.Kind != "ReplicaSet" {
			return
		}
		ns := obj.GetObjectMeta().Namespace
		if rs, ok := d.rsets.Get(ns, ref.Name); ok {
			if dref := api.ControllerOf(rs); dref != nil && dref.Kind == "Deployment" {
				enqueue(api.Key(ns, dref.Name))
			}
		}
	}
	return client.Handler{
		OnUpdate: func(old, cur api.Object) {
			if !isFinished(old.(*api.Pod)) && isFinished(cur.(*api.Pod)) {
				h(cur)
			}
		},
		OnDelete: h,
	}
}

// isFinished: Succeeded or Failed; such a pod no longer blocks Recreate.
func isFinished(p *api.Pod) bool {
	return p.Status.Phase == api.PodSucceeded || p.Status.Phase == api.PodFailed
}

// Deployment condition types and reasons, as Kubernetes.
const (
	DeploymentAvailable   = "Available"
	DeploymentProgressing = "Progressing"

	ReasonMinimumReplicasAvailable   = "MinimumReplicasAvailable"
	ReasonMinimumReplicasUnavailable = "MinimumReplicasUnavailable"
	ReasonNewReplicaSetCreated       = "NewReplicaSetCreated"
	ReasonFoundNewReplicaSet         = "FoundNewReplicaSet"
	ReasonReplicaSetUpdated          = "ReplicaSetUpdated"
	ReasonNewReplicaSetAvailable     = "NewReplicaSetAvailable"
	ReasonProgressDeadlineExceeded   = "ProgressDeadlineExceeded"
	ReasonDeploymentPaused           = "DeploymentPaused"
	ReasonDeploymentResumed          = "DeploymentResumed"
)

// Defaults of maxSurge and maxUnavailable. The API server fills them (and
// the other defaults); the controller applies them too so it never trips
// over a nil.
const (
	defaultMaxSurge       = "25%"
	defaultMaxUnavailable = "25%"
)

// Reconcile drives the Deployment key ("namespace/name") one step toward
// its template and replicas. It implements client.Reconciler.
func (d *DeploymentController) Reconcile(ctx context.Context, key string) error {
	ns, name := client.SplitKey(key)
	dep, ok := getAs[*api.Deployment](d.deploys, ns, name)
	if !ok {
		logReconcile(d.log, false, key, "gone", "gone", "none")
		return nil
	}
	if dep.DeletionTimestamp != nil {
		logReconcile(d.log, false, key, "being deleted", "gone", "none (the garbage collector removes its replica sets)")
		return nil
	}
	sel, err := dep.Spec.Selector.AsSelector()
	if err != nil || sel.Empty() {
		// Validation should have refused it; retrying will not help.
		d.log.Warn("invalid or empty selector; nothing done", "key", key, "err", err)
		return nil
	}
	surge, unavailable, err := fenceposts(dep)
	if err != nil {
		d.log.Warn("cannot reconcile; nothing done", "key", key, "err", err)
		return nil
	}

	rsList, err := claim(ctx, d.client, dep, sel, listAs[*api.ReplicaSet](d.rsets.ListBy(nil, ns)))
	if err != nil {
		return requeueOnConflict(d.log, "deployment "+key, fmt.Errorf("deployment %s: claim replica sets: %w", key, err))
	}
	s := &deploymentSync{
		DeploymentController: d,
		d:                    dep,
		hash:                 ComputeHash(&dep.Spec.Template),
		desired:              replicasOf(dep.Spec.Replicas),
		surge:                surge,
		unavailable:          unavailable,
		now:                  d.now(),
	}
	for _, rs := range rsList {
		// The new ReplicaSet: created for this template (its hash label),
		// or with an equal template (an old one an undo brought back).
		if s.newRS == nil && (rs.Labels[api.LabelPodTemplateHash] == s.hash || ComputeHash(&rs.Spec.Template) == s.hash) {
			s.newRS = rs
		} else {
			s.old = append(s.old, rs)
		}
	}
	sortByRevision(s.old)

	// One step of the rollout; each step reads the caches again next time.
	var stepErr error
	switch {
	case dep.Spec.Paused:
		stepErr = s.scalePaused(ctx)
	case dep.Spec.Strategy.Type == api.Recreate:
		stepErr = s.recreate(ctx)
	default:
		stepErr = s.rollingUpdate(ctx)
	}
	if stepErr == nil {
		stepErr = s.cleanupHistory(ctx)
	}

	requeue, statusErr := s.syncStatus(ctx)
	s.logLine(key)
	if err := errors.Join(stepErr, statusErr); err != nil {
		return requeueOnConflict(d.log, "deployment "+key, err)
	}
	if requeue > 0 {
		return client.RequeueAfter(requeue)
	}
	return nil
}

// deploymentSync is the state of one reconcile of one Deployment.
type deploymentSync struct {
	*DeploymentController
	d           *api.Deployment
	hash        string            // of d's template: the new ReplicaSet's suffix
	newRS       *api.ReplicaSet   // the ReplicaSet of d's template, nil until created
	old         []*api.ReplicaSet // every other ReplicaSet d controls, by revision (oldest first)
	desired     int32             // d's replicas
	surge       int32             // maxSurge, resolved
	unavailable int32             // maxUnavailable, resolved
	now         time.Time

	createdNew bool     // this reconcile created newRS
	actions    []string // what this reconcile did, for the log line
}

// all returns the new ReplicaSet (if any) and the old ones.
func (s *deploymentSync) all() []*api.ReplicaSet {
	if s.newRS == nil {
		return s.old
	}
	return append([]*api.ReplicaSet{s.newRS}, s.old...)
}

// rollingUpdate does one step of a RollingUpdate, as Kubernetes'
// rolloutRolling: first scale the new ReplicaSet up (creating it if
// needed); if that changed nothing, scale old ones down. Each step is
// bounded so that the pods never exceed replicas+maxSurge and the
// available pods never drop below replicas-maxUnavailable.
func (s *deploymentSync) rollingUpdate(ctx context.Context) error {
	created := s.newRS == nil
	if err := s.ensureNewRS(ctx, s.newReplicas()); err != nil || created {
		return err // a new ReplicaSet was one step: old ones wait for its pods
	}
	if want := s.newReplicas(); want != replicasOf(s.newRS.Spec.Replicas) {
		return s.scale(ctx, &s.newRS, want)
	}
	return s.scaleDownOld(ctx)
}

// newReplicas is what the new ReplicaSet should have now, as Kubernetes'
// NewRSNewReplicas for RollingUpdate.
func (s *deploymentSync) newReplicas() int32 {
	cur := int32(0)
	if s.newRS != nil {
		cur = replicasOf(s.newRS.Spec.Replicas)
	}
	if sumReplicas(s.old) == 0 {
		// Nothing old left (or never was): the new ReplicaSet owns every pod.
		return s.desired
	}
	total := sumReplicas(s.all())
	maxTotal := s.desired + s.surge
	if total >= maxTotal {
		return cur // no room to surge: wait for old pods to go
	}
	up := min(maxTotal-total, s.desired-cur) // never above desired
	return cur + up
}

// scaleDownOld scales old ReplicaSets down as far as availability allows,
// as Kubernetes' reconcileOldReplicaSets: first the old pods that are not
// available anyway (they would block the rollout), then available ones
// while availability stays at replicas-maxUnavailable, oldest first.
func (s *deploymentSync) scaleDownOld(ctx context.Context) error {
	if sumReplicas(s.old) == 0 {
		return nil
	}
	minAvailable := s.desired - s.unavailable
	newUnavailable := int32(0)
	if s.newRS != nil {
		newUnavailable = max(0, replicasOf(s.newRS.Spec.Replicas)-s.newRS.Status.AvailableReplicas)
	}
	maxScaledDown := sumReplicas(s.all()) - minAvailable - newUnavailable
	if maxScaledDown <= 0 {
		return nil
	}

	// 1. Unhealthy old pods cost no availability.
	cleaned := int32(0)
	for i := range s.old {
		rs := s.old[i]
		spec := replicasOf(rs.Spec.Replicas)
		unhealthy := spec - rs.Status.AvailableReplicas
		if spec == 0 || unhealthy <= 0 || cleaned >= maxScaledDown {
			continue
		}
		n := min(unhealthy, maxScaledDown-cleaned)
		if err := s.scale(ctx, &s.old[i], spec-n); err != nil {
			return err
		}
		cleaned += n
	}

	// 2. Available old pods, while enough stay available.
	available := int32(0)
	for _, rs := range s.all() {
		available += rs.Status.AvailableReplicas
	}
	budget := available - minAvailable
	for i := range s.old {
		if budget <= 0 {
			break
		}
		spec := replicasOf(s.old[i].Spec.Replicas)
		if spec == 0 {
			continue
		}
		n := min(spec, budget)
		if err := s.scale(ctx, &s.old[i], spec-n); err != nil {
			return err
		}
		budget -= n
	}
	return nil
}

// recreate does one step of a Recreate rollout: old ReplicaSets to 0,
// then wait until none of their pods is left, then the new ReplicaSet to
// replicas. Old and new pods never run together.
func (s *deploymentSync) recreate(ctx context.Context) error {
	if sumReplicas(s.old) > 0 {
		for i := range s.old {
			if replicasOf(s.old[i].Spec.Replicas) > 0 {
				if err := s.scale(ctx, &s.old[i], 0); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if n := s.oldPodsLeft(); n > 0 {
		s.actions = append(s.actions, fmt.Sprintf("waiting for %s of old replica sets to terminate", plural(n, "pod")))
		return nil
	}
	if err := s.ensureNewRS(ctx, s.desired); err != nil {
		return err
	}
	if replicasOf(s.newRS.Spec.Replicas) != s.desired {
		return s.scale(ctx, &s.newRS, s.desired)
	}
	return nil
}

// oldPodsLeft counts the pods of old ReplicaSets that have not finished,
// including those still terminating.
func (s *deploymentSync) oldPodsLeft() int {
	uids := map[string]bool{}
	for _, rs := range s.old {
		uids[rs.UID] = true
	}
	n := 0
	for _, p := range listAs[*api.Pod](s.pods.ListBy(nil, s.d.Namespace)) {
		if ref := api.ControllerOf(p); ref != nil && uids[ref.UID] && !isFinished(p) {
			n++
		}
	}
	return n
}

// scalePaused handles a replica change of a paused Deployment without
// rolling: if exactly one ReplicaSet runs pods (or none does), it gets the
// new count; in the middle of a paused rollout (several ReplicaSets with
// pods) the counts stay as they are until the Deployment is resumed.
// (Kubernetes scales proportionally there; skiff keeps it simple.)
func (s *deploymentSync) scalePaused(ctx context.Context) error {
	var active []*api.ReplicaSet
	for _, rs := range s.all() {
		if replicasOf(rs.Spec.Replicas) > 0 {
			active = append(active, rs)
		}
	}
	var target **api.ReplicaSet
	switch {
	case len(active) > 1:
		return nil
	case len(active) == 1 && active[0] == s.newRS:
		target = &s.newRS
	case len(active) == 1:
		target = &s.old[slices.Index(s.old, active[0])]
	case s.newRS != nil:
		target = &s.newRS
	case len(s.old) > 0:
		target = &s.old[len(s.old)-1] // the newest
	default:
		return nil // paused before its first rollout
	}
	if replicasOf((*target).Spec.Replicas) == s.desired {
		return nil
	}
	return s.scale(ctx, target, s.desired)
}

// ensureNewRS creates the new ReplicaSet with replicas if it does not
// exist yet, or makes sure its revision is the highest (after a rollback)
// and its annotations follow the Deployment. It also records the revision
// on the Deployment, as Kubernetes does.
func (s *deploymentSync) ensureNewRS(ctx context.Context, replicas int32) error {
	revision := maxRevision(s.old) + 1
	if s.newRS == nil {
		rs := s.newReplicaSet(revision, replicas)
		out, err := s.client.Create(ctx, rs)
		if err != nil {
			if api.IsAlreadyExists(err) {
				// Either our cache has not seen it yet (the next reconcile
				// will), or another object took the name.
				return fmt.Errorf("deployment %s: create replica set %s: %w (it exists but is not in the cache as this deployment's)", api.KeyOf(s.d), rs.Name, err)
			}
			s.events.Eventf(ctx, s.d, api.EventWarning, "FailedCreate", "Failed to create new replica set %q: %v", rs.Name, err)
			return fmt.Errorf("deployment %s: create replica set %s: %w", api.KeyOf(s.d), rs.Name, err)
		}
		s.newRS = out.(*api.ReplicaSet)
		s.createdNew = true
		s.actions = append(s.actions, fmt.Sprintf("created replica set %s (revision %d) with %s", rs.Name, revision, plural(int(replicas), "replica")))
		if replicas > 0 {
			s.events.Eventf(ctx, s.d, api.EventNormal, "ScalingReplicaSet", "Scaled up replica set %s to %d", rs.Name, replicas)
		}
		return s.recordRevision(ctx, revision)
	}

	// The new ReplicaSet exists: is its metadata current?
	want := maps.Clone(s.newRS.Annotations)
	if want == nil {
		want = map[string]string{}
	}
	if Revision(s.newRS) < revision {
		// An old template came back (rollout undo): it becomes the newest revision.
		want[api.AnnotationRevision] = strconv.FormatInt(revision, 10)
	} else {
		revision = Revision(s.newRS)
	}
	if cause, ok := s.d.Annotations[api.AnnotationChangeCause]; ok {
		want[api.AnnotationChangeCause] = cause
	}
	if !maps.Equal(want, s.newRS.Annotations) || s.newRS.Spec.MinReadySeconds != s.d.Spec.MinReadySeconds {
		u := api.Clone(s.newRS)
		u.Annotations = want
		u.Spec.MinReadySeconds = s.d.Spec.MinReadySeconds
		out, err := s.client.Update(ctx, u)
		if err != nil {
			return fmt.Errorf("deployment %s: update replica set %s: %w", api.KeyOf(s.d), u.Name, err)
		}
		if Revision(s.newRS) != revision {
			s.actions = append(s.actions, fmt.Sprintf("replica set %s is now revision %d (its template came back)", u.Name, revision))
		}
		s.newRS = out.(*api.ReplicaSet)
	}
	return s.recordRevision(ctx, revision)
}

// newReplicaSet builds the ReplicaSet of the Deployment's template: the
// template plus the pod-template-hash label (on the selector too, so it
// only ever selects pods of this template), the revision and change-cause
// annotations, and a controller reference to the Deployment.
func (s *deploymentSync) newReplicaSet(revision int64, replicas int32) *api.ReplicaSet {
	d := api.Clone(s.d) // its maps become the ReplicaSet's: never share the cache's
	tmpl := d.Spec.Template
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	tmpl.Labels[api.LabelPodTemplateHash] = s.hash
	sel := d.Spec.Selector
	if sel.MatchLabels == nil {
		sel.MatchLabels = map[string]string{}
	}
	sel.MatchLabels[api.LabelPodTemplateHash] = s.hash
	ann := map[string]string{api.AnnotationRevision: strconv.FormatInt(revision, 10)}
	if cause, ok := d.Annotations[api.AnnotationChangeCause]; ok {
		ann[api.AnnotationChangeCause] = cause
	}
	rs := &api.ReplicaSet{
		ObjectMeta: api.ObjectMeta{
			Name:            d.Name + "-" + s.hash,
			Namespace:       d.Namespace,
			Labels:          maps.Clone(tmpl.Labels),
			Annotations:     ann,
			OwnerReferences: []api.OwnerReference{controllerRef(s.d)},
		},
		Spec: api.ReplicaSetSpec{
			Replicas:        &replicas,
			MinReadySeconds: d.Spec.MinReadySeconds,
			Selector:        sel,
			Template:        tmpl,
		},
	}
	api.SetTypeMeta(rs)
	return rs
}

// recordRevision puts the current revision on the Deployment's own
// annotations (`describe deployment` shows it).
func (s *deploymentSync) recordRevision(ctx context.Context, revision int64) error {
	rev := strconv.FormatInt(revision, 10)
	if s.d.Annotations[api.AnnotationRevision] == rev {
		return nil
	}
	u := api.Clone(s.d)
	if u.Annotations == nil {
		u.Annotations = map[string]string{}
	}
	u.Annotations[api.AnnotationRevision] = rev
	out, err := s.client.Update(ctx, u)
	if err != nil {
		return fmt.Errorf("deployment %s: record revision %s: %w", api.KeyOf(s.d), rev, err)
	}
	s.d = out.(*api.Deployment)
	return nil
}

// scale sets the replicas of *rs (the new one or an element of s.old),
// replaces it with the API's answer, and records an event and an action.
func (s *deploymentSync) scale(ctx context.Context, rs **api.ReplicaSet, replicas int32) error {
	cur := replicasOf((*rs).Spec.Replicas)
	u := api.Clone(*rs)
	u.Spec.Replicas = &replicas
	out, err := s.client.Update(ctx, u)
	if err != nil {
		return fmt.Errorf("deployment %s: scale replica set %s to %d: %w", api.KeyOf(s.d), u.Name, replicas, err)
	}
	*rs = out.(*api.ReplicaSet)
	dir := "up"
	if replicas < cur {
		dir = "down"
	}
	s.events.Eventf(ctx, s.d, api.EventNormal, "ScalingReplicaSet", "Scaled %s replica set %s to %d", dir, u.Name, replicas)
	s.actions = append(s.actions, fmt.Sprintf("scaled %s %s from %d to %d", dir, u.Name, cur, replicas))
	return nil
}

// cleanupHistory deletes the oldest old ReplicaSets beyond
// revisionHistoryLimit. Only those with no pods (spec and status at 0) are
// deleted; the others wait for a later reconcile.
func (s *deploymentSync) cleanupHistory(ctx context.Context) error {
	limit := int32(api.DefaultRevisionHistoryLimit)
	if s.d.Spec.RevisionHistoryLimit != nil {
		limit = *s.d.Spec.RevisionHistoryLimit
	}
	var cleanable []*api.ReplicaSet
	for _, rs := range s.old { // oldest first
		if rs.DeletionTimestamp == nil {
			cleanable = append(cleanable, rs)
		}
	}
	excess := len(cleanable) - int(limit)
	for _, rs := range cleanable {
		if excess <= 0 {
			break
		}
		if replicasOf(rs.Spec.Replicas) != 0 || rs.Status.Replicas != 0 {
			continue
		}
		uid := rs.UID
		err := s.client.Delete(ctx, replicaSetKind(), rs.Namespace, rs.Name, api.DeleteOptions{Preconditions: &api.Preconditions{UID: &uid}})
		if err != nil && !api.IsNotFound(err) && !api.IsConflict(err) {
			return fmt.Errorf("deployment %s: delete old replica set %s: %w", api.KeyOf(s.d), rs.Name, err)
		}
		s.actions = append(s.actions, fmt.Sprintf("deleted old replica set %s (revision %d, history limit %d)", rs.Name, Revision(rs), limit))
		excess--
	}
	return nil
}

// syncStatus computes the Deployment's status from its ReplicaSets and
// writes it when it changed. It returns when to look again for the
// progress deadline (0: no need).
func (s *deploymentSync) syncStatus(ctx context.Context) (time.Duration, error) {
	st, requeue := s.status(ctx)
	if sameJSON(st, normalizeStatus(s.d.Status)) {
		return requeue, nil
	}
	u := api.Clone(s.d)
	u.Status = st
	if _, err := s.client.UpdateStatus(ctx, u); err != nil && !api.IsNotFound(err) {
		return requeue, fmt.Errorf("deployment %s: update status: %w", api.KeyOf(s.d), err)
	}
	return requeue, nil
}

// status computes the status, as Kubernetes' calculateStatus and
// syncRolloutStatus.
func (s *deploymentSync) status(ctx context.Context) (api.DeploymentStatus, time.Duration) {
	prev := normalizeStatus(s.d.Status)
	st := api.DeploymentStatus{
		ObservedGeneration: s.d.Generation,
		CollisionCount:     prev.CollisionCount,
		Conditions:         slices.Clone(prev.Conditions),
	}
	for _, rs := range s.all() {
		st.Replicas += rs.Status.Replicas
		st.ReadyReplicas += rs.Status.ReadyReplicas
		st.AvailableReplicas += rs.Status.AvailableReplicas
	}
	if s.newRS != nil {
		st.UpdatedReplicas = s.newRS.Status.Replicas
	}
	st.UnavailableReplicas = max(0, s.desired-st.AvailableReplicas)
	now := api.NewTime(s.now.Truncate(time.Second))

	// Available: are enough pods available, counting maxUnavailable?
	if st.AvailableReplicas >= s.desired-s.unavailable {
		st.Conditions = setCondition(st.Conditions, newCondition(DeploymentAvailable, api.ConditionTrue, ReasonMinimumReplicasAvailable, "Deployment has minimum availability.", now))
	} else {
		st.Conditions = setCondition(st.Conditions, newCondition(DeploymentAvailable, api.ConditionFalse, ReasonMinimumReplicasUnavailable, "Deployment does not have minimum availability.", now))
	}

	// Progressing: is the rollout moving, done, or stuck?
	cur := findCondition(st.Conditions, DeploymentProgressing)
	rsName := ""
	if s.newRS != nil {
		rsName = s.newRS.Name
	}
	deadline := time.Duration(api.DefaultProgressDeadlineSeconds) * time.Second
	if p := s.d.Spec.ProgressDeadlineSeconds; p != nil {
		deadline = time.Duration(*p) * time.Second
	}
	complete := st.UpdatedReplicas == s.desired && st.Replicas == s.desired &&
		st.AvailableReplicas == s.desired && st.ObservedGeneration >= s.d.Generation
	var requeue time.Duration
	switch {
	case s.d.Spec.Paused:
		st.Conditions = setCondition(st.Conditions, newCondition(DeploymentProgressing, api.ConditionUnknown, ReasonDeploymentPaused, "Deployment is paused", now))
	case cur != nil && cur.Reason == ReasonDeploymentPaused:
		st.Conditions = setCondition(st.Conditions, newCondition(DeploymentProgressing, api.ConditionUnknown, ReasonDeploymentResumed, "Deployment is resumed", now))
	case s.newRS == nil:
		// Nothing to report until the new ReplicaSet exists (Recreate waits for old pods).
	case complete:
		st.Conditions = setCondition(st.Conditions, newCondition(DeploymentProgressing, api.ConditionTrue, ReasonNewReplicaSetAvailable, fmt.Sprintf("ReplicaSet %q has successfully progressed.", rsName), now))
	case cur != nil && cur.Reason == ReasonNewReplicaSetAvailable && st.Replicas == st.UpdatedReplicas:
		// A finished rollout being scaled, not a new rollout: no deadline.
	case s.createdNew:
		st.Conditions = setCondition(st.Conditions, newCondition(DeploymentProgressing, api.ConditionTrue, ReasonNewReplicaSetCreated, fmt.Sprintf("Created new replica set %q", rsName), now))
	case cur == nil:
		st.Conditions = setCondition(st.Conditions, newCondition(DeploymentProgressing, api.ConditionTrue, ReasonFoundNewReplicaSet, fmt.Sprintf("Found new replica set %q", rsName), now))
	case madeProgress(prev, st):
		// Progress renews lastUpdateTime, which restarts the deadline clock.
		c := newCondition(DeploymentProgressing, api.ConditionTrue, ReasonReplicaSetUpdated, fmt.Sprintf("ReplicaSet %q is progressing.", rsName), now)
		if cur.Status == api.ConditionTrue {
			c.LastTransitionTime = cur.LastTransitionTime
		}
		st.Conditions = replaceCondition(st.Conditions, c)
	case cur.Reason == ReasonProgressDeadlineExceeded:
		// Already reported.
	case !now.Before(cur.LastUpdateTime.Add(deadline)):
		st.Conditions = setCondition(st.Conditions, newCondition(DeploymentProgressing, api.ConditionFalse, ReasonProgressDeadlineExceeded, fmt.Sprintf("ReplicaSet %q has timed out progressing.", rsName), now))
		s.events.Eventf(ctx, s.d, api.EventWarning, ReasonProgressDeadlineExceeded, "Deployment %q has timed out progressing.", s.d.Name)
	default:
		// Still within the deadline: look again when it passes.
		requeue = cur.LastUpdateTime.Add(deadline).Sub(now.Time) + time.Second
	}
	return st, requeue
}

// madeProgress: more updated, ready or available pods, or fewer old ones,
// than the previous status, as Kubernetes' DeploymentProgressing.
func madeProgress(prev, cur api.DeploymentStatus) bool {
	return cur.UpdatedReplicas > prev.UpdatedReplicas ||
		cur.Replicas-cur.UpdatedReplicas < prev.Replicas-prev.UpdatedReplicas ||
		cur.ReadyReplicas > prev.ReadyReplicas ||
		cur.AvailableReplicas > prev.AvailableReplicas
}

// sameJSON compares two values as the API stores them (times at second
// precision, nil and empty alike): an unchanged status is never written,
// or every write would wake the controller to write again.
func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

// normalizeStatus makes empty and nil condition lists compare equal.
func normalizeStatus(st api.DeploymentStatus) api.DeploymentStatus {
	if len(st.Conditions) == 0 {
		st.Conditions = nil
	}
	return st
}

func newCondition(typ, status, reason, msg string, now api.Time) api.DeploymentCondition {
	return api.DeploymentCondition{Type: typ, Status: status, Reason: reason, Message: msg, LastUpdateTime: now, LastTransitionTime: now}
}

func findCondition(conds []api.DeploymentCondition, typ string) *api.DeploymentCondition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// setCondition sets c as Kubernetes' SetDeploymentCondition: the same status
// and reason change nothing (the times stay); the same status keeps its
// lastTransitionTime.
func setCondition(conds []api.DeploymentCondition, c api.DeploymentCondition) []api.DeploymentCondition {
	if cur := findCondition(conds, c.Type); cur != nil {
		if cur.Status == c.Status && cur.Reason == c.Reason {
			return conds
		}
		if cur.Status == c.Status {
			c.LastTransitionTime = cur.LastTransitionTime
		}
	}
	return replaceCondition(conds, c)
}

// replaceCondition puts c in place of the condition of its type (or appends it).
func replaceCondition(conds []api.DeploymentCondition, c api.DeploymentCondition) []api.DeploymentCondition {
	out := slices.DeleteFunc(slices.Clone(conds), func(x api.DeploymentCondition) bool { return x.Type == c.Type })
	return append(out, c)
}

// logLine writes the reconcile's one line, e.g.
//
//	deployment default/nginx: observed 2 ready of 3 (rs nginx-7c5ddbdf54 3 pods), desired 3 of template 7c5ddbdf54, action: none
func (s *deploymentSync) logLine(key string) {
	var ready, pods int32
	var rs []string
	for _, r := range s.all() {
		ready += r.Status.ReadyReplicas
		pods += r.Status.Replicas
		if replicasOf(r.Spec.Replicas) > 0 || r.Status.Replicas > 0 {
			rs = append(rs, fmt.Sprintf("%s %s", r.Name, plural(int(r.Status.Replicas), "pod")))
		}
	}
	observed := fmt.Sprintf("%d ready of %d", ready, pods)
	if len(rs) > 0 {
		observed += " (rs " + strings.Join(rs, ", ") + ")"
	}
	strategy := s.d.Spec.Strategy.Type
	if strategy == "" {
		strategy = api.RollingUpdate
	}
	desired := fmt.Sprintf("%d of template %s", s.desired, s.hash)
	switch {
	case s.d.Spec.Paused:
		desired += " (paused)"
	case strategy == api.RollingUpdate:
		desired += fmt.Sprintf(" (RollingUpdate, maxSurge %d, maxUnavailable %d)", s.surge, s.unavailable)
	default:
		desired += " (" + strategy + ")"
	}
	action := "none"
	if len(s.actions) > 0 {
		action = strings.Join(s.actions, "; ")
	}
	logReconcile(s.log, len(s.actions) > 0, key, observed, desired, action)
}

// fenceposts resolves maxSurge and maxUnavailable to pod counts: surge
// rounds up, unavailable rounds down, and if both come to 0 unavailable
// becomes 1 (else a rollout could never move). Recreate has neither.
func fenceposts(d *api.Deployment) (surge, unavailable int32, err error) {
	if d.Spec.Strategy.Type == api.Recreate {
		return 0, 0, nil
	}
	desired := int(replicasOf(d.Spec.Replicas))
	ms, mu := intstr.FromString(defaultMaxSurge), intstr.FromString(defaultMaxUnavailable)
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		if ru.MaxSurge != nil {
			ms = *ru.MaxSurge
		}
		if ru.MaxUnavailable != nil {
			mu = *ru.MaxUnavailable
		}
	}
	s, err := intstr.GetScaledValueFromIntOrPercent(&ms, desired, true)
	if err != nil {
		return 0, 0, fmt.Errorf("spec.strategy.rollingUpdate.maxSurge: %w", err)
	}
	u, err := intstr.GetScaledValueFromIntOrPercent(&mu, desired, false)
	if err != nil {
		return 0, 0, fmt.Errorf("spec.strategy.rollingUpdate.maxUnavailable: %w", err)
	}
	if s == 0 && u == 0 {
		u = 1
	}
	return int32(s), int32(min(u, desired)), nil
}

// ComputeHash is the pod-template-hash of a template: FNV-32a of its JSON
// (maps are encoded with sorted keys, so equal templates hash equally),
// without the pod-template-hash label itself, rendered with Kubernetes'
// SafeEncodeString (no vowels, so no accidental words): e.g. "7c5ddbdf54".
// The CLI uses it too (rollout history, undo).
func ComputeHash(template *api.PodTemplateSpec) string {
	t := *template
	if _, ok := t.Labels[api.LabelPodTemplateHash]; ok {
		t.Labels = maps.Clone(t.Labels)
		delete(t.Labels, api.LabelPodTemplateHash)
	}
	b, err := json.Marshal(t)
	if err != nil {
		panic(fmt.Sprintf("controllers: encode pod template: %v", err)) // plain data always encodes
	}
	h := fnv.New32a()
	h.Write(b)
	return utilrand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// Revision reads the revision annotation of a ReplicaSet or Deployment;
// 0 when absent or malformed.
func Revision(obj api.Object) int64 {
	v, err := strconv.ParseInt(obj.GetObjectMeta().Annotations[api.AnnotationRevision], 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// ReplicaSetsOf returns the ReplicaSets that deploy controls, oldest
// revision first: what `rollout history` lists and `rollout undo` picks from.
func ReplicaSetsOf(deploy *api.Deployment, all []*api.ReplicaSet) []*api.ReplicaSet {
	var out []*api.ReplicaSet
	for _, rs := range all {
		if rs.Namespace == deploy.Namespace && api.IsControlledBy(rs, deploy.UID) {
			out = append(out, rs)
		}
	}
	sortByRevision(out)
	return out
}

// sortByRevision sorts oldest revision first (then by creation, then name).
func sortByRevision(rss []*api.ReplicaSet) {
	slices.SortStableFunc(rss, func(a, b *api.ReplicaSet) int {
		if c := cmp.Compare(Revision(a), Revision(b)); c != 0 {
			return c
		}
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

func maxRevision(rss []*api.ReplicaSet) int64 {
	var m int64
	for _, rs := range rss {
		m = max(m, Revision(rs))
	}
	return m
}

func sumReplicas(rss []*api.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		n += replicasOf(rs.Spec.Replicas)
	}
	return n
}
