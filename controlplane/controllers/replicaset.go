package controllers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// The ReplicaSet controller keeps spec.replicas pods running for each
// ReplicaSet. One reconcile of one ReplicaSet:
//
//  1. Claim pods: the pods in its namespace that it controls (ownerReference
//     with controller=true and its uid), after adopting orphans that match
//     its selector and releasing its pods that no longer match.
//  2. Count the active ones: a pod being deleted (deletionTimestamp set) or
//     finished (Succeeded, Failed) does not count.
//  3. If the pod cache has caught up with our own last writes (see
//     expectations below): create the missing pods, or delete the extra
//     ones, the least valuable first (see deleteFirst).
//  4. Write status (replicas, fullyLabeled, ready, available,
//     observedGeneration) when it changed.
//
// It never remembers what it did last time except the expectations; every
// number comes from the caches, so repeating a reconcile is harmless.
type ReplicaSetController struct {
	client client.Interface
	rsets  Lister // *api.ReplicaSet
	pods   Lister // *api.Pod
	events EventRecorder
	log    *slog.Logger
	expect *expectations
	// now is the clock (tests set it).
	now func() time.Time
}

// burstReplicas bounds the pods created or deleted by one reconcile, so
// one huge ReplicaSet cannot monopolize a worker (Kubernetes uses 500).
const burstReplicas = 500

// NewReplicaSetController returns the controller. rsets and pods are
// caches of all namespaces.
func NewReplicaSetController(c client.Interface, rsets, pods Lister, events EventRecorder, log *slog.Logger) *ReplicaSetController {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	indexControllers(pods) // claimCandidates
	if events == nil {
		events = nopRecorder{}
	}
	return &ReplicaSetController{
		client: c,
		rsets:  rsets,
		pods:   pods,
		events: events,
		log:    log.With("controller", replicaSetControllerName),
		expect: newExpectations(),
		now:    time.Now,
	}
}

// PodHandler enqueues the ReplicaSets a pod change concerns: its
// controller, and for an orphan every ReplicaSet whose selector matches it
// (one of them may adopt it). It only enqueues keys (STYLE 7).
func (r *ReplicaSetController) PodHandler(enqueue func(key string)) client.Handler {
	h := func(obj api.Object) {
		if ref := api.ControllerOf(obj); ref != nil {
			if ref.Kind == "ReplicaSet" {
				enqueue(api.Key(obj.GetObjectMeta().Namespace, ref.Name))
			}
			return
		}
		for _, rs := range r.matchingReplicaSets(obj) {
			enqueue(api.KeyOf(rs))
		}
	}
	return client.Handler{
		OnAdd: h,
		OnUpdate: func(old, cur api.Object) {
			h(cur)
			// A change of labels or owner may concern the old controller too.
			if ref := api.ControllerOf(old); ref != nil && ref.Kind == "ReplicaSet" {
				enqueue(api.Key(old.GetObjectMeta().Namespace, ref.Name))
			}
		},
		OnDelete: h,
	}
}

// matchingReplicaSets lists the cached ReplicaSets whose selector matches pod.
func (r *ReplicaSetController) matchingReplicaSets(pod api.Object) []*api.ReplicaSet {
	var out []*api.ReplicaSet
	set := labels.Set(pod.GetObjectMeta().Labels)
	for _, rs := range listAs[*api.ReplicaSet](r.rsets.ListBy(nil, pod.GetObjectMeta().Namespace)) {
		if sel, err := rs.Spec.Selector.AsSelector(); err == nil && !sel.Empty() && sel.Matches(set) {
			out = append(out, rs)
		}
	}
	return out
}

// Reconcile drives the ReplicaSet key ("namespace/name") toward its
// replicas. It implements client.Reconciler.
func (r *ReplicaSetController) Reconcile(ctx context.Context, key string) error {
	ns, name := client.SplitKey(key)
	rs, ok := getAs[*api.ReplicaSet](r.rsets, ns, name)
	if !ok {
		// Deleted: its pods are the garbage collector's business.
		r.expect.forget(key)
		logReconcile(r.log, false, key, "gone", "gone", "none")
		return nil
	}
	sel, err := rs.Spec.Selector.AsSelector()
	if err != nil {
		// Validation should have refused it; retrying will not help.
		r.log.Warn("invalid selector; nothing done", "key", key, "err", err)
		return nil
	}

	// 1. Claim: which pods are ours?
	pods, err := claim(ctx, r.client, rs, sel, claimCandidates[*api.Pod](r.pods, rs))
	if err != nil {
		return requeueOnConflict(r.log, "replicaset "+key, fmt.Errorf("replicaset %s: claim pods: %w", key, err))
	}
	// 2. Which of them count?
	active := slices.DeleteFunc(slices.Clone(pods), func(p *api.Pod) bool { return !isPodActive(p) })
	desired := int(replicasOf(rs.Spec.Replicas))
	now := r.now()

	// 3. Act, unless our last writes are still on their way to the cache.
	var action string
	var actErr error
	switch pending := r.expect.pending(key, ns, r.pods, now); {
	case rs.DeletionTimestamp != nil:
		action = "none (being deleted)"
	case pending > 0:
		action = fmt.Sprintf("none (waiting for the cache to show %s we created or deleted)", plural(pending, "pod"))
	default:
		action, actErr = r.manageReplicas(ctx, rs, active, desired)
	}

	// 4. Status, from what the cache showed.
	status, nextAvailable := replicaSetStatus(rs, active, now)
	statusErr := r.updateStatus(ctx, rs, status)

	r.logLine(key, rs, status, desired, action)
	if err := errors.Join(actErr, statusErr); err != nil {
		return requeueOnConflict(r.log, "replicaset "+key, err)
	}
	if pending := r.expect.pending(key, ns, r.pods, now); pending > 0 {
		// Normally the pod events wake us first; this is the safety net
		// for expectations that can never be met.
		return client.RequeueAfter(expectationsTTL)
	}
	if nextAvailable > 0 {
		// A ready pod becomes available after minReadySeconds: look again then.
		return client.RequeueAfter(nextAvailable)
	}
	return nil
}

// manageReplicas creates or deletes pods so that len(active) == desired,
// at most burstReplicas in one go. It returns the action for the log line.
func (r *ReplicaSetController) manageReplicas(ctx context.Context, rs *api.ReplicaSet, active []*api.Pod, desired int) (string, error) {
	key := api.KeyOf(rs)
	diff := len(active) - desired
	switch {
	case diff < 0:
		var created []string
		for range min(-diff, burstReplicas) {
			pod := newPodFor(rs)
			if _, err := r.client.Create(ctx, pod); err != nil {
				r.events.Eventf(ctx, rs, api.EventWarning, "FailedCreate", "Error creating: %v", err)
				return createdAction(created), fmt.Errorf("replicaset %s: create pod: %w", key, err)
			}
			r.expect.expectCreate(key, pod.Name, r.now())
			r.events.Eventf(ctx, rs, api.EventNormal, "SuccessfulCreate", "Created pod: %s", pod.Name)
			created = append(created, pod.Name)
		}
		return createdAction(created), nil
	case diff > 0:
		victims := slices.Clone(active)
		slices.SortFunc(victims, deleteFirst)
		victims = victims[:min(diff, burstReplicas)]
		var deleted []string
		for _, p := range victims {
			uid := p.UID // only this pod, not a new one that took its name
			err := r.client.Delete(ctx, podKind(), p.Namespace, p.Name, api.DeleteOptions{Preconditions: &api.Preconditions{UID: &uid}})
			if err != nil && !api.IsNotFound(err) && !api.IsConflict(err) { // Conflict: another pod took the name; ours is gone
				r.events.Eventf(ctx, rs, api.EventWarning, "FailedDelete", "Error deleting: %v", err)
				return deletedAction(deleted), fmt.Errorf("replicaset %s: delete pod %s: %w", key, p.Name, err)
			}
			if api.IsConflict(err) {
				continue // the name belongs to a new pod now: nothing to wait for
			}
			r.expect.expectDelete(key, p.Name, r.now())
			r.events.Eventf(ctx, rs, api.EventNormal, "SuccessfulDelete", "Deleted pod: %s", p.Name)
			deleted = append(deleted, p.Name)
		}
		return deletedAction(deleted), nil
	}
	return "none", nil
}

func createdAction(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return fmt.Sprintf("created %s: %s", plural(len(names), "pod"), strings.Join(names, ", "))
}

func deletedAction(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return fmt.Sprintf("deleted %s: %s", plural(len(names), "pod"), strings.Join(names, ", "))
}

// logLine writes the reconcile's one line (see logReconcile).
func (r *ReplicaSetController) logLine(key string, rs *api.ReplicaSet, st api.ReplicaSetStatus, desired int, action string) {
	observed := fmt.Sprintf("%s (%d ready, %d available)", plural(int(st.Replicas), "pod"), st.ReadyReplicas, st.AvailableReplicas)
	logReconcile(r.log, !strings.HasPrefix(action, "none"), key, observed, fmt.Sprint(desired), action)
}

// updateStatus writes status if it differs from what the ReplicaSet shows.
func (r *ReplicaSetController) updateStatus(ctx context.Context, rs *api.ReplicaSet, st api.ReplicaSetStatus) error {
	if rs.Status == st {
		return nil
	}
	u := api.Clone(rs) // never modify the cached object (STYLE 8)
	u.Status = st
	if _, err := r.client.UpdateStatus(ctx, u); err != nil && !api.IsNotFound(err) {
		return fmt.Errorf("replicaset %s: update status: %w", api.KeyOf(rs), err)
	}
	return nil
}

// replicaSetStatus counts the active pods. It also returns how long until
// the next ready pod becomes available (0: none waiting).
func replicaSetStatus(rs *api.ReplicaSet, active []*api.Pod, now time.Time) (api.ReplicaSetStatus, time.Duration) {
	st := api.ReplicaSetStatus{ObservedGeneration: rs.Generation}
	templateLabels := labels.SelectorFromSet(rs.Spec.Template.Labels)
	minReady := time.Duration(rs.Spec.MinReadySeconds) * time.Second
	var next time.Duration
	for _, p := range active {
		st.Replicas++
		if templateLabels.Matches(labels.Set(p.Labels)) {
			st.FullyLabeledReplicas++
		}
		if !isPodReady(p) {
			continue
		}
		st.ReadyReplicas++
		if wait := untilAvailable(p, minReady, now); wait == 0 {
			st.AvailableReplicas++
		} else if next == 0 || wait < next {
			next = wait
		}
	}
	return st, next
}

// newPodFor builds a pod from the ReplicaSet's template: named
// <rs-name>-<5 random characters>, with the template's labels, annotations
// and spec, and a controller reference to the ReplicaSet.
func newPodFor(rs *api.ReplicaSet) *api.Pod {
	t := api.Clone(rs) // the template's maps and slices must not be shared with the cache
	pod := &api.Pod{
		ObjectMeta: api.ObjectMeta{
			Name:            podName(rs.Name),
			Namespace:       rs.Namespace,
			Labels:          t.Spec.Template.Labels,
			Annotations:     t.Spec.Template.Annotations,
			OwnerReferences: []api.OwnerReference{controllerRef(rs)},
		},
		Spec: t.Spec.Template.Spec,
	}
	api.SetTypeMeta(pod)
	return pod
}

// podName is <prefix>-<5 random characters>, the prefix cut so that the
// name stays a valid 63-character label, as the API server's generateName.
// The random part avoids vowels (no accidental words).
func podName(rsName string) string {
	const maxPrefix = 63 - 5 - 1
	return fmt.Sprintf("%.*s-%s", maxPrefix, rsName, utilrand.String(5))
}

// isPodActive: not being deleted and not finished. Only active pods count
// toward replicas.
func isPodActive(p *api.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != api.PodSucceeded && p.Status.Phase != api.PodFailed
}

// readyCondition returns the pod's Ready condition, or nil.
func readyCondition(p *api.Pod) *api.PodCondition {
	for i, c := range p.Status.Conditions {
		if c.Type == api.PodReady {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// isPodReady: the Ready condition is True (all containers ready, probes passing).
func isPodReady(p *api.Pod) bool {
	c := readyCondition(p)
	return c != nil && c.Status == api.ConditionTrue
}

// untilAvailable is how long a ready pod still has to stay ready to count
// as available: 0 if it already is (ready for minReady), as Kubernetes'
// IsPodAvailable. A pod with no transition time never becomes available
// while minReady > 0.
func untilAvailable(p *api.Pod, minReady time.Duration, now time.Time) time.Duration {
	if minReady == 0 {
		return 0
	}
	c := readyCondition(p)
	if c == nil || c.LastTransitionTime.IsZero() {
		return minReady
	}
	if wait := c.LastTransitionTime.Add(minReady).Sub(now); wait > 0 {
		return wait
	}
	return 0
}

// deleteFirst orders pods for scale-down: the first is the cheapest to
// lose. A simplified version of Kubernetes' ActivePods ranking:
//
//  1. not yet on a node before on a node (nothing started yet);
//  2. Pending before Unknown before Running;
//  3. not ready before ready;
//  4. of two ready pods, the one ready for less time (it has warmed up less);
//  5. more container restarts before fewer (it is less healthy);
//  6. newer before older (an older pod has proven itself);
//  7. then by name, so the choice is deterministic.
func deleteFirst(a, b *api.Pod) int {
	if c := cmp.Compare(boolRank(a.Spec.NodeName != ""), boolRank(b.Spec.NodeName != "")); c != 0 {
		return c
	}
	if c := cmp.Compare(phaseRank(a.Status.Phase), phaseRank(b.Status.Phase)); c != 0 {
		return c
	}
	ra, rb := isPodReady(a), isPodReady(b)
	if c := cmp.Compare(boolRank(ra), boolRank(rb)); c != 0 {
		return c
	}
	if ra && rb {
		// Later transition to ready first.
		if c := readyCondition(b).LastTransitionTime.Compare(readyCondition(a).LastTransitionTime.Time); c != 0 {
			return c
		}
	}
	if c := cmp.Compare(restarts(b), restarts(a)); c != 0 {
		return c
	}
	if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

func phaseRank(phase string) int {
	switch phase {
	case api.PodPending, "":
		return 0
	case api.PodUnknown:
		return 1
	default: // Running
		return 2
	}
}

func restarts(p *api.Pod) int32 {
	var n int32
	for _, cs := range p.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}

// Expectations
//
// The pod cache lags the API server by a few milliseconds. Without care, a
// reconcile that runs right after we created 3 pods would still see 0 pods
// in the cache and create 3 more. Kubernetes' ControllerExpectations
// prevent that, and so do these: after creating or deleting pods, the
// controller remembers their names, and it does not create or delete again
// for that ReplicaSet until the cache shows every created pod and no longer
// shows any deleted one alive. Unlike Kubernetes' counters, this checks the
// cache itself, so informer handlers stay pure "enqueue a key".
//
// An expectation that can never be met (a created pod deleted by someone
// before the cache saw it) expires after expectationsTTL.

// expectationsTTL bounds how long a ReplicaSet waits for the cache
// (Kubernetes: 5 minutes; a lab cluster's cache is never that late).
const expectationsTTL = time.Minute

type expectations struct {
	mu sync.Mutex
	m  map[string]*expectation // by ReplicaSet key
}

type expectation struct {
	creates map[string]bool // pod names created, not yet in the cache
	deletes map[string]bool // pod names deleted, still alive in the cache
	since   time.Time       // of the latest write
}

func newExpectations() *expectations {
	return &expectations{m: map[string]*expectation{}}
}

func (e *expectations) get(key string, now time.Time) *expectation {
	x := e.m[key]
	if x == nil {
		x = &expectation{creates: map[string]bool{}, deletes: map[string]bool{}}
		e.m[key] = x
	}
	x.since = now
	return x
}

// expectCreate records that we created pod name for the ReplicaSet key.
func (e *expectations) expectCreate(key, name string, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.get(key, now).creates[name] = true
}

// expectDelete records that we deleted pod name for the ReplicaSet key.
func (e *expectations) expectDelete(key, name string, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.get(key, now).deletes[name] = true
}

// pending drops the expectations the pod cache now agrees with and returns
// how many remain (0: the cache has caught up, the controller may act).
func (e *expectations) pending(key, namespace string, pods Lister, now time.Time) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.m[key]
	if x == nil {
		return 0
	}
	if now.Sub(x.since) > expectationsTTL {
		delete(e.m, key)
		return 0
	}
	for name := range x.creates {
		if _, ok := pods.Get(namespace, name); ok {
			delete(x.creates, name)
		}
	}
	for name := range x.deletes {
		if o, ok := pods.Get(namespace, name); !ok || o.GetObjectMeta().DeletionTimestamp != nil {
			delete(x.deletes, name)
		}
	}
	n := len(x.creates) + len(x.deletes)
	if n == 0 {
		delete(e.m, key)
	}
	return n
}

// forget drops the expectations of a deleted ReplicaSet.
func (e *expectations) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}
