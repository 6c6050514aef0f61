package controllers

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// The disruption controller keeps each PodDisruptionBudget's status, as
// Kubernetes' (pkg/controller/disruption). The API server's eviction
// handler (controlplane/apiserver/eviction.go) reads that status to allow
// or refuse an eviction, and spends one allowed disruption per eviction.
// One reconcile of one budget:
//
//  1. Its pods are those of the namespace its selector matches ({} matches
//     all, no selector none).
//  2. Expected pods and desired healthy: with an integer minAvailable, the
//     pods matched and minAvailable itself; with maxUnavailable or a
//     percent, the scale of the pods' controllers (a Deployment's
//     replicas for its ReplicaSets' pods, a ReplicaSet's, a
//     StatefulSet's), from which maxUnavailable is taken away (rounded
//     up) or of which minAvailable percent is kept (rounded up). A pod
//     whose controller has no scale makes the budget fail safe: no
//     disruption allowed, condition DisruptionAllowed False SyncFailed.
//  3. Healthy pods are the ready ones not being deleted and not evicted in
//     the last 2 minutes (status.disruptedPods, written by the eviction
//     handler; an evicted pod still there after 2 minutes counts again,
//     with a NotDeleted warning).
//  4. disruptionsAllowed = healthy - desired (at least 0; 0 while no pod
//     is expected), with the condition DisruptionAllowed True
//     SufficientPods or False InsufficientPods, and observedGeneration.
type DisruptionController struct {
	client  client.Interface
	pdbs    Lister // *api.PodDisruptionBudget
	pods    Lister // *api.Pod
	rsets   Lister // *api.ReplicaSet
	deploys Lister // *api.Deployment
	ssets   Lister // *api.StatefulSet; nil: none
	events  EventRecorder
	log     *slog.Logger
	// now is the clock (tests set it).
	now func() time.Time
}

const disruptionControllerName = "disruption-controller"

// DisruptionDeletionTimeout is how long an evicted pod is expected to take
// to go before it counts as healthy again (Kubernetes' DeletionTimeout).
const DisruptionDeletionTimeout = 2 * time.Minute

func pdbKind() *api.Kind { return api.MustKindOf(&api.PodDisruptionBudget{}) }

// NewDisruptionController returns the controller; the listers are caches
// of all namespaces (ssets may be nil).
func NewDisruptionController(c client.Interface, pdbs, pods, rsets, deploys, ssets Lister, events EventRecorder, log *slog.Logger) *DisruptionController {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if events == nil {
		events = nopRecorder{}
	}
	return &DisruptionController{client: c, pdbs: pdbs, pods: pods, rsets: rsets, deploys: deploys, ssets: ssets,
		events: events, log: log.With("controller", disruptionControllerName), now: time.Now}
}

// PodHandler enqueues the budgets whose selector matches a pod (its old
// labels and its new ones).
func (d *DisruptionController) PodHandler(enqueue func(key string)) client.Handler {
	h := func(obj api.Object) {
		m := obj.GetObjectMeta()
		for _, p := range listAs[*api.PodDisruptionBudget](d.pdbs.ListBy(nil, m.Namespace)) {
			if pdbSelector(p).Matches(labels.Set(m.Labels)) {
				enqueue(api.KeyOf(p))
			}
		}
	}
	return client.Handler{
		OnAdd:    h,
		OnUpdate: func(old, cur api.Object) { h(old); h(cur) },
		OnDelete: h,
	}
}

// WorkloadHandler enqueues every budget of a workload's namespace when its
// replicas change (a budget with maxUnavailable or a percent counts them).
func (d *DisruptionController) WorkloadHandler(enqueue func(key string)) client.Handler {
	all := func(obj api.Object) {
		for _, p := range d.pdbs.ListBy(nil, obj.GetObjectMeta().Namespace) {
			enqueue(api.KeyOf(p))
		}
	}
	return client.Handler{
		OnAdd: all,
		OnUpdate: func(old, cur api.Object) {
			if workloadReplicas(old) != workloadReplicas(cur) {
				all(cur)
			}
		},
		OnDelete: all,
	}
}

func workloadReplicas(o api.Object) int32 {
	switch w := o.(type) {
	case *api.ReplicaSet:
		return replicasOf(w.Spec.Replicas)
	case *api.Deployment:
		return replicasOf(w.Spec.Replicas)
	case *api.StatefulSet:
		return replicasOf(w.Spec.Replicas)
	}
	return 0
}

// pdbSelector is a budget's selector: nil selects nothing, {} everything.
func pdbSelector(p *api.PodDisruptionBudget) labels.Selector {
	sel, err := p.Spec.Selector.AsSelector()
	if err != nil {
		return labels.Nothing()
	}
	return sel
}

// Reconcile recomputes a budget's status. It implements client.Reconciler.
func (d *DisruptionController) Reconcile(ctx context.Context, key string) error {
	ns, name := client.SplitKey(key)
	pdb, ok := getAs[*api.PodDisruptionBudget](d.pdbs, ns, name)
	if !ok {
		logReconcile(d.log, false, key, "gone", "gone", "none")
		return nil
	}
	now := d.now()
	pods := listAs[*api.Pod](d.pods.ListBy(pdbSelector(pdb), ns))
	if len(pods) == 0 {
		d.events.Eventf(ctx, pdb, api.EventNormal, "NoPods", "No matching pods found")
	}
	expected, desired, unmanaged, err := d.expectedPodCount(pdb, pods)
	if err != nil {
		d.events.Eventf(ctx, pdb, api.EventWarning, "CalculateExpectedPodCountFailed", "Failed to calculate the number of expected pods: %v", err)
		return requeueOnConflict(d.log, "poddisruptionbudget "+key, d.failSafe(ctx, pdb, err, now))
	}
	if len(unmanaged) > 0 {
		d.events.Eventf(ctx, pdb, api.EventWarning, "UnmanagedPods", "Pods selected by this PodDisruptionBudget (selector: %v) were found "+
			"to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. "+
			"To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value.", selectorString(pdb.Spec.Selector))
	}
	disrupted, recheck := d.disruptedPods(ctx, pdb, pods, now)
	healthy := countHealthyPods(pods, disrupted, now)
	st := pdbStatus(pdb, healthy, desired, expected, disrupted, now)
	acted, err := d.writeStatus(ctx, pdb, st)
	logReconcile(d.log, acted, key,
		fmt.Sprintf("%s matched, %d healthy, %d expected", plural(len(pods), "pod"), healthy, expected),
		fmt.Sprintf("at least %d healthy", desired),
		fmt.Sprintf("%d disruptions allowed", st.DisruptionsAllowed))
	if err != nil {
		return requeueOnConflict(d.log, "poddisruptionbudget "+key, err)
	}
	if recheck > 0 {
		return client.RequeueAfter(recheck)
	}
	return nil
}

func selectorString(s *api.LabelSelector) string {
	if s == nil {
		return "nil"
	}
	return s.String()
}

// expectedPodCount is step 2 (Kubernetes' getExpectedPodCount).
func (d *DisruptionController) expectedPodCount(pdb *api.PodDisruptionBudget, pods []*api.Pod) (expected, desired int32, unmanaged []string, err error) {
	s := pdb.Spec
	switch {
	case s.MaxUnavailable != nil:
		if expected, unmanaged, err = d.expectedScale(pods); err != nil {
			return
		}
		var n int
		if n, err = intstr.GetScaledValueFromIntOrPercent(s.MaxUnavailable, int(expected), true); err != nil {
			return
		}
		desired = max(0, expected-int32(n))
	case s.MinAvailable != nil && s.MinAvailable.Type == intstr.Int:
		desired, expected = s.MinAvailable.IntVal, int32(len(pods))
	case s.MinAvailable != nil:
		if expected, unmanaged, err = d.expectedScale(pods); err != nil {
			return
		}
		var n int
		if n, err = intstr.GetScaledValueFromIntOrPercent(s.MinAvailable, int(expected), true); err != nil {
			return
		}
		desired = int32(n)
	}
	return
}

// expectedScale sums the scale of the pods' controllers, each counted
// once; pods without a controller are returned by name.
func (d *DisruptionController) expectedScale(pods []*api.Pod) (int32, []string, error) {
	scales := map[string]int32{} // by controller uid
	var unmanaged []string
	for _, p := range pods {
		ref := api.ControllerOf(p)
		if ref == nil {
			unmanaged = append(unmanaged, p.Name)
			continue
		}
		if _, ok := scales[ref.UID]; ok {
			continue
		}
		uid, scale, ok := d.controllerScale(ref, p.Namespace)
		if !ok {
			return 0, unmanaged, fmt.Errorf("found no controllers for pod %q", p.Name)
		}
		scales[uid] = scale
	}
	var sum int32
	for _, n := range scales {
		sum += n
	}
	return sum, unmanaged, nil
}

// controllerScale finds a pod controller's scale (Kubernetes' finders): a
// ReplicaSet of a Deployment counts as the Deployment.
func (d *DisruptionController) controllerScale(ref *api.OwnerReference, ns string) (string, int32, bool) {
	switch ref.Kind {
	case "ReplicaSet":
		rs, ok := getAs[*api.ReplicaSet](d.rsets, ns, ref.Name)
		if !ok || rs.UID != ref.UID {
			return "", 0, false
		}
		if dref := api.ControllerOf(rs); dref != nil && dref.Kind == "Deployment" {
			if dep, ok := getAs[*api.Deployment](d.deploys, ns, dref.Name); ok && dep.UID == dref.UID {
				return dep.UID, replicasOf(dep.Spec.Replicas), true
			}
		}
		return rs.UID, replicasOf(rs.Spec.Replicas), true
	case "StatefulSet":
		if d.ssets == nil {
			return "", 0, false
		}
		ss, ok := getAs[*api.StatefulSet](d.ssets, ns, ref.Name)
		if !ok || ss.UID != ref.UID {
			return "", 0, false
		}
		return ss.UID, replicasOf(ss.Spec.Replicas), true
	}
	return "", 0, false
}

// disruptedPods is step 3's map: the evictions of the last 2 minutes
// whose pods are still there and not yet deleting; also when to look
// again (the earliest of them to expire; 0: none).
func (d *DisruptionController) disruptedPods(ctx context.Context, pdb *api.PodDisruptionBudget, pods []*api.Pod, now time.Time) (map[string]api.Time, time.Duration) {
	out := map[string]api.Time{}
	var recheck time.Duration
	for _, p := range pods {
		at, ok := pdb.Status.DisruptedPods[p.Name]
		if !ok || p.DeletionTimestamp != nil {
			continue
		}
		expires := at.Add(DisruptionDeletionTimeout)
		if expires.Before(now) {
			d.events.Eventf(ctx, p, api.EventWarning, "NotDeleted", "Pod was expected by PDB %s/%s to be deleted but it wasn't", pdb.Namespace, pdb.Name)
			continue
		}
		if wait := expires.Sub(now); recheck == 0 || wait < recheck {
			recheck = wait
		}
		out[p.Name] = at
	}
	return out, recheck
}

// countHealthyPods counts the ready pods neither deleting nor recently evicted.
func countHealthyPods(pods []*api.Pod, disrupted map[string]api.Time, now time.Time) int32 {
	var n int32
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if at, ok := disrupted[p.Name]; ok && at.Add(DisruptionDeletionTimeout).After(now) {
			continue
		}
		if isPodReady(p) {
			n++
		}
	}
	return n
}

// pdbStatus is step 4.
func pdbStatus(pdb *api.PodDisruptionBudget, healthy, desired, expected int32, disrupted map[string]api.Time, now time.Time) api.PodDisruptionBudgetStatus {
	allowed := healthy - desired
	if expected <= 0 || allowed <= 0 {
		allowed = 0
	}
	if len(disrupted) == 0 {
		disrupted = nil
	}
	st := api.PodDisruptionBudgetStatus{
		ObservedGeneration: pdb.Generation,
		DisruptedPods:      disrupted,
		DisruptionsAllowed: allowed,
		CurrentHealthy:     healthy,
		DesiredHealthy:     desired,
		ExpectedPods:       expected,
		Conditions:         slices.Clone(pdb.Status.Conditions),
	}
	api.SetDisruptionAllowedCondition(&st, now)
	return st
}

// failSafe allows no disruption when the budget cannot be computed.
func (d *DisruptionController) failSafe(ctx context.Context, pdb *api.PodDisruptionBudget, cause error, now time.Time) error {
	st := pdb.Status
	st.Conditions = slices.Clone(st.Conditions)
	st.DisruptedPods = maps.Clone(st.DisruptedPods)
	st.DisruptionsAllowed = 0
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: api.DisruptionAllowedCondition, Status: metav1.ConditionFalse,
		Reason: api.SyncFailedReason, Message: cause.Error(), ObservedGeneration: st.ObservedGeneration, LastTransitionTime: metav1.NewTime(now.Truncate(time.Second))})
	_, err := d.writeStatus(ctx, pdb, st)
	return err
}

// writeStatus writes st when it differs; it reports whether it wrote.
func (d *DisruptionController) writeStatus(ctx context.Context, pdb *api.PodDisruptionBudget, st api.PodDisruptionBudgetStatus) (bool, error) {
	if reflect.DeepEqual(pdb.Status, st) || sameStatusIgnoringTimes(pdb.Status, st) {
		return false, nil
	}
	u := api.Clone(pdb)
	u.Status = st
	if _, err := d.client.UpdateStatus(ctx, u); err != nil && !api.IsNotFound(err) {
		return false, fmt.Errorf("poddisruptionbudget %s: update status: %w", api.KeyOf(pdb), err)
	}
	return true, nil
}

// sameStatusIgnoringTimes compares two statuses as JSON, but for the
// conditions' transition times (SetStatusCondition keeps an unchanged
// condition's time; a new one gets now).
func sameStatusIgnoringTimes(a, b api.PodDisruptionBudgetStatus) bool {
	strip := func(s api.PodDisruptionBudgetStatus) api.PodDisruptionBudgetStatus {
		s.Conditions = slices.Clone(s.Conditions)
		for i := range s.Conditions {
			s.Conditions[i].LastTransitionTime = metav1.Time{}
		}
		if len(s.DisruptedPods) == 0 {
			s.DisruptedPods = nil
		}
		return s
	}
	return reflect.DeepEqual(strip(a), strip(b))
}
