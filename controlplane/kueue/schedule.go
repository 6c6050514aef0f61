package kueue

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// Schedule runs one scheduling cycle: every ClusterQueue admits what fits
// of its pending workloads, in order, and its status and its LocalQueues'
// are brought up to date. It is safe to call at any time: everything it
// decides from is read again.
func (m *Manager) Schedule(ctx context.Context) error {
	s, err := m.snapshot(ctx)
	if err != nil {
		return err
	}
	var wake time.Duration
	pending := map[string][]*api.Workload{}
	for _, wl := range s.workloads {
		if !isPending(wl) {
			continue
		}
		if cq := s.clusterQueueOf(wl); cq != "" && s.cqs[cq] != nil {
			pending[cq] = append(pending[cq], wl)
		}
	}
	for _, name := range s.cqNames {
		c := s.cqs[name]
		if p := c.cq.Spec.StopPolicy; p != nil && *p != api.StopPolicyNone {
			continue
		}
		if missing := s.missingFlavors(c); len(missing) > 0 {
			continue
		}
		for _, wl := range pending[name] {
			if rs := wl.Status.RequeueState; rs != nil && rs.RequeueAt != nil && rs.RequeueAt.After(s.now) {
				if d := rs.RequeueAt.Sub(s.now); wake == 0 || d < wake {
					wake = d
				}
				continue // backing off after a PodsReadyTimeout
			}
			admitted, err := m.tryAdmit(ctx, s, c, wl)
			if err != nil {
				return err
			}
			if !admitted && c.cq.Spec.QueueingStrategy == api.StrictFIFO {
				break // the head blocks the queue
			}
		}
	}
	if err := m.writeQueueStatus(ctx, s); err != nil {
		return err
	}
	if wake > 0 {
		return client.RequeueAfter(wake)
	}
	return nil
}

func (s *snapshot) missingFlavors(c *cqState) []string {
	var out []string
	for _, rg := range c.cq.Spec.ResourceGroups {
		for _, f := range rg.Flavors {
			if s.flavors[f.Name] == nil {
				out = append(out, f.Name)
			}
		}
	}
	return out
}

// namespaceMatches: the ClusterQueue's namespaceSelector selects wl's
// namespace (nil selects none).
func (s *snapshot) namespaceMatches(c *cqState, wl *api.Workload) bool {
	sel := c.cq.Spec.NamespaceSelector
	if sel == nil {
		return false
	}
	ls, err := sel.AsSelector()
	if err != nil {
		return false
	}
	var nsLabels labels.Set
	if ns := s.namespaces[wl.Namespace]; ns != nil {
		nsLabels = ns.Labels
	}
	return ls.Matches(nsLabels)
}

// tryAdmit admits wl into c if it fits (reporting true), else marks it
// pending with the reason and issues the preemptions that would make room.
func (m *Manager) tryAdmit(ctx context.Context, s *snapshot, c *cqState, wl *api.Workload) (bool, error) {
	if !s.namespaceMatches(c, wl) {
		return false, m.setPending(ctx, wl, "workload namespace doesn't match ClusterQueue selector")
	}
	a := s.assign(c, wl)
	if a.fits() {
		if msg := s.placeTopology(c, wl, a); msg != "" { // topology.go
			return false, m.setPending(ctx, wl, msg)
		}
		if err := m.admit(ctx, s, c, wl, a); err != nil {
			return false, err
		}
		return true, nil
	}
	msg := a.message
	if !a.never {
		if victims := s.preemptionTargets(c, wl, a); len(victims) > 0 {
			for _, v := range victims {
				if err := m.preempt(ctx, s, wl, c, v); err != nil {
					return false, err
				}
			}
			msg += fmt.Sprintf(". Pending the preemption of %d workload(s)", len(victims))
		}
	}
	return false, m.setPending(ctx, wl, msg)
}

// setCondition sets a condition with Kueue's observedGeneration.
func setCondition(wl *api.Workload, t string, status metav1.ConditionStatus, reason, msg string, now time.Time) bool {
	return apimeta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: wl.Generation, LastTransitionTime: metav1.NewTime(now)})
}

// admit writes the admission: QuotaReserved and Admitted, with the events.
func (m *Manager) admit(ctx context.Context, s *snapshot, c *cqState, wl *api.Workload, a *assignment) error {
	next := api.Clone(wl)
	next.Status.Admission = &api.WorkloadAdmission{ClusterQueue: c.cq.Name, PodSetAssignments: a.podSets}
	setCondition(next, api.WorkloadQuotaReserved, metav1.ConditionTrue, "QuotaReserved", "Quota reserved in ClusterQueue "+c.cq.Name, s.now)
	setCondition(next, api.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", "The workload is admitted", s.now)
	if apimeta.FindStatusCondition(next.Status.Conditions, api.WorkloadEvicted) != nil {
		setCondition(next, api.WorkloadEvicted, metav1.ConditionFalse, "QuotaReserved", "Previously: "+apimeta.FindStatusCondition(next.Status.Conditions, api.WorkloadEvicted).Message, s.now)
	}
	if apimeta.FindStatusCondition(next.Status.Conditions, api.WorkloadPreempted) != nil {
		setCondition(next, api.WorkloadPreempted, metav1.ConditionFalse, "QuotaReserved", "Previously: "+apimeta.FindStatusCondition(next.Status.Conditions, api.WorkloadPreempted).Message, s.now)
	}
	written, err := m.c.UpdateStatus(ctx, next)
	if err != nil {
		if api.IsConflict(err) || api.IsNotFound(err) {
			return client.RequeueAfter(0) // read again next cycle
		}
		return fmt.Errorf("admit workload %s/%s: %w", wl.Namespace, wl.Name, err)
	}
	w := written.(*api.Workload)
	m.assume(w)
	c.usage.add(a.usage, 1)
	c.admitted = append(c.admitted, w)
	waited := s.now.Sub(queuedAt(wl)).Seconds()
	m.events.Eventf(ctx, w, api.EventNormal, "QuotaReserved", "Quota reserved in ClusterQueue %s, wait time since queued was %.0fs", c.cq.Name, waited)
	m.events.Eventf(ctx, w, api.EventNormal, "Admitted", "Admitted by ClusterQueue %s, wait time since reservation was 0s", c.cq.Name)
	m.log.Info("admitted", "workload", api.Key(wl.Namespace, wl.Name), "clusterQueue", c.cq.Name, "waited", waited)
	return nil
}

// setPending writes QuotaReserved=False, reason Pending, with msg, and a
// Warning event, when they change.
func (m *Manager) setPending(ctx context.Context, wl *api.Workload, msg string) error {
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, api.WorkloadQuotaReserved); c != nil && c.Status == metav1.ConditionFalse && c.Reason == api.WorkloadPending && c.Message == msg {
		return nil
	}
	next := api.Clone(wl)
	setCondition(next, api.WorkloadQuotaReserved, metav1.ConditionFalse, api.WorkloadPending, msg, m.now())
	written, err := m.c.UpdateStatus(ctx, next)
	if err != nil {
		if api.IsConflict(err) || api.IsNotFound(err) {
			return nil // changed meanwhile: the next cycle sees it
		}
		return fmt.Errorf("mark workload %s/%s pending: %w", wl.Namespace, wl.Name, err)
	}
	m.assume(written.(*api.Workload))
	m.events.Eventf(ctx, written, api.EventWarning, api.WorkloadPending, "%s", msg)
	return nil
}

// preemptionTargets chooses the admitted workloads whose eviction lets wl
// fit, as Kueue's classical preemption: candidates in the cohort that
// borrow (reclaimWithinCohort) and in c itself (withinClusterQueue) that
// the policies allow, ordered other queues first, then lowest priority,
// then the most recently admitted; removed one by one until wl fits, then
// those not needed are put back. None when wl would not fit even so.
func (s *snapshot) preemptionTargets(c *cqState, wl *api.Workload, a *assignment) []*api.Workload {
	p := c.cq.Spec.Preemption
	if p == nil {
		return nil
	}
	pri := priorityOf(wl)
	allowed := func(policy string, v *api.Workload) bool {
		switch policy {
		case api.KueuePreemptLowerPriority:
			return priorityOf(v) < pri
		case api.KueuePreemptLowerOrNewerEqualPriority:
			return priorityOf(v) < pri || (priorityOf(v) == pri && queuedAt(v).After(queuedAt(wl)))
		case api.KueuePreemptAny:
			return true
		}
		return false
	}
	uses := func(v *api.Workload) bool {
		u := admissionUsage(v.Status.Admission)
		for f := range a.short {
			if u[f] > 0 {
				return true
			}
		}
		return false
	}
	type cand struct {
		wl    *api.Workload
		owner *cqState
	}
	var cands []cand
	for _, m := range s.members(c) {
		for _, v := range m.admitted {
			if apimeta.IsStatusConditionTrue(v.Status.Conditions, api.WorkloadEvicted) || !uses(v) {
				continue
			}
			if m == c && allowed(p.WithinClusterQueue, v) {
				cands = append(cands, cand{v, m})
			}
			if m != c && allowed(p.ReclaimWithinCohort, v) && borrowing(m, admissionUsage(v.Status.Admission)) {
				cands = append(cands, cand{v, m})
			}
		}
	}
	if len(cands) == 0 {
		return nil
	}
	admittedAt := func(w *api.Workload) time.Time {
		if cond := apimeta.FindStatusCondition(w.Status.Conditions, api.WorkloadQuotaReserved); cond != nil {
			return cond.LastTransitionTime.Time
		}
		return time.Time{}
	}
	slices.SortStableFunc(cands, func(x, y cand) int {
		if (x.owner != c) != (y.owner != c) {
			if x.owner != c {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(priorityOf(x.wl), priorityOf(y.wl)), admittedAt(y.wl).Compare(admittedAt(x.wl)))
	})
	fits := func() bool { return s.assign(c, wl).fits() }
	var victims []cand
	for _, v := range cands {
		v.owner.usage.add(admissionUsage(v.wl.Status.Admission), -1)
		victims = append(victims, v)
		if fits() {
			break
		}
	}
	if !fits() {
		for _, v := range victims {
			v.owner.usage.add(admissionUsage(v.wl.Status.Admission), 1)
		}
		return nil
	}
	for i := len(victims) - 1; i >= 0; i-- { // put back what is not needed
		v := victims[i]
		v.owner.usage.add(admissionUsage(v.wl.Status.Admission), 1)
		if fits() {
			victims = slices.Delete(victims, i, i+1)
			continue
		}
		v.owner.usage.add(admissionUsage(v.wl.Status.Admission), -1)
	}
	for _, v := range victims { // quota stays held until the pods are gone
		v.owner.usage.add(admissionUsage(v.wl.Status.Admission), 1)
	}
	out := make([]*api.Workload, len(victims))
	for i, v := range victims {
		out[i] = v.wl
	}
	return out
}

// borrowing: m uses more than its nominal quota of a resource u charges.
func borrowing(m *cqState, u amounts) bool {
	for f := range u {
		if n, _, _, _ := m.quota(f); m.usage[f] > n {
			return true
		}
	}
	return false
}

// preempt marks v evicted to make room for wl (Kueue's preemption words);
// the job side suspends its Job and releases the quota.
func (m *Manager) preempt(ctx context.Context, s *snapshot, wl *api.Workload, c *cqState, v *api.Workload) error {
	reason := api.InClusterQueueReason
	if v.Status.Admission.ClusterQueue != c.cq.Name {
		reason = api.InCohortReclamationReason
	}
	human := map[string]string{api.InClusterQueueReason: "prioritization in the ClusterQueue", api.InCohortReclamationReason: "reclamation within the cohort"}[reason]
	msg := fmt.Sprintf("Preempted to accommodate a workload (UID: %s, JobUID: %s) due to %s; preemptor path: %s; preemptee path: %s",
		cmp.Or(wl.UID, "UNKNOWN"), cmp.Or(wl.Labels[JobUIDLabel], "UNKNOWN"), human, s.path(c.cq), s.path(s.cqs[v.Status.Admission.ClusterQueue].cq))
	next := api.Clone(v)
	setCondition(next, api.WorkloadEvicted, metav1.ConditionTrue, api.WorkloadEvictedByPreemption, msg, s.now)
	setCondition(next, api.WorkloadPreempted, metav1.ConditionTrue, reason, msg, s.now)
	written, err := m.c.UpdateStatus(ctx, next)
	if err != nil {
		if api.IsConflict(err) || api.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("preempt workload %s/%s: %w", v.Namespace, v.Name, err)
	}
	m.assume(written.(*api.Workload))
	m.events.Eventf(ctx, written, api.EventNormal, "Preempted", "%s", msg)
	m.log.Info("preempted", "workload", api.Key(v.Namespace, v.Name), "for", api.Key(wl.Namespace, wl.Name), "reason", reason)
	return nil
}

// path is Kueue's preemption path of a ClusterQueue: /COHORT/CQ or /CQ.
func (s *snapshot) path(cq *api.ClusterQueue) string {
	if cq.Spec.CohortName != "" {
		return "/" + cq.Spec.CohortName + "/" + cq.Name
	}
	return "/" + cq.Name
}

// writeQueueStatus brings every ClusterQueue's and LocalQueue's status up
// to date (written only when it changed).
func (m *Manager) writeQueueStatus(ctx context.Context, s *snapshot) error {
	type counts struct{ pending, reserving, admitted int32 }
	cqCounts, lqCounts := map[string]*counts{}, map[string]*counts{}
	lqUsage := map[string]amounts{}
	for _, name := range s.cqNames {
		cqCounts[name] = &counts{}
	}
	for k := range s.lqs {
		lqCounts[k] = &counts{}
		lqUsage[k] = amounts{}
	}
	for _, wl := range s.workloads {
		lqk := api.Key(wl.Namespace, wl.Spec.QueueName)
		lc := lqCounts[lqk]
		var cc *counts
		switch {
		case holdsQuota(wl):
			cc = cqCounts[wl.Status.Admission.ClusterQueue]
		case isPending(wl):
			cc = cqCounts[s.clusterQueueOf(wl)]
		}
		for _, c := range []*counts{cc, lc} {
			if c == nil {
				continue
			}
			switch {
			case holdsQuota(wl):
				c.reserving++
				if apimeta.IsStatusConditionTrue(wl.Status.Conditions, api.WorkloadAdmitted) {
					c.admitted++
				}
			case isPending(wl):
				c.pending++
			}
		}
		if lc != nil && holdsQuota(wl) {
			lqUsage[lqk].add(admissionUsage(wl.Status.Admission), 1)
		}
	}
	for _, name := range s.cqNames {
		c := s.cqs[name]
		next := api.Clone(c.cq)
		n := cqCounts[name]
		next.Status.PendingWorkloads, next.Status.ReservingWorkloads, next.Status.AdmittedWorkloads = n.pending, n.reserving, n.admitted
		next.Status.FlavorsReservation = flavorUsage(c)
		next.Status.FlavorsUsage = flavorUsage(c)
		if missing := s.missingFlavors(c); len(missing) > 0 {
			apimeta.SetStatusCondition(&next.Status.Conditions, metav1.Condition{Type: api.ClusterQueueActive, Status: metav1.ConditionFalse, Reason: "FlavorNotFound",
				Message: fmt.Sprintf("Can't admit new workloads: references missing ResourceFlavor(s): %v", missing), ObservedGeneration: next.Generation})
		} else {
			apimeta.SetStatusCondition(&next.Status.Conditions, metav1.Condition{Type: api.ClusterQueueActive, Status: metav1.ConditionTrue, Reason: "Ready",
				Message: "Can admit new workloads", ObservedGeneration: next.Generation})
		}
		if err := m.writeStatusIfChanged(ctx, c.cq, next, &c.cq.Status, &next.Status); err != nil {
			return err
		}
	}
	for k, lq := range s.lqs {
		next := api.Clone(lq)
		n := lqCounts[k]
		next.Status.PendingWorkloads, next.Status.ReservingWorkloads, next.Status.AdmittedWorkloads = n.pending, n.reserving, n.admitted
		var fu []api.LocalQueueFlavorUsage
		if c := s.cqs[lq.Spec.ClusterQueue]; c != nil {
			for _, f := range flavorUsageOf(c, lqUsage[k]) {
				lf := api.LocalQueueFlavorUsage{Name: f.Name}
				for _, r := range f.Resources {
					lf.Resources = append(lf.Resources, api.LocalQueueResourceUsage{Name: r.Name, Total: r.Total})
				}
				fu = append(fu, lf)
			}
			apimeta.SetStatusCondition(&next.Status.Conditions, metav1.Condition{Type: api.ClusterQueueActive, Status: metav1.ConditionTrue, Reason: "Ready",
				Message: "Can submit new workloads to localQueue", ObservedGeneration: next.Generation})
		} else {
			apimeta.SetStatusCondition(&next.Status.Conditions, metav1.Condition{Type: api.ClusterQueueActive, Status: metav1.ConditionFalse, Reason: "ClusterQueueDoesNotExist",
				Message: "Can't submit new workloads to clusterQueue", ObservedGeneration: next.Generation})
		}
		next.Status.FlavorsReservation, next.Status.FlavorsUsage = fu, fu
		if err := m.writeStatusIfChanged(ctx, lq, next, &lq.Status, &next.Status); err != nil {
			return err
		}
	}
	return nil
}

// writeStatusIfChanged writes next when its status differs from cur's
// (conditions compared without their times).
func (m *Manager) writeStatusIfChanged(ctx context.Context, cur, next api.Object, curStatus, nextStatus any) error {
	if equalStatus(curStatus, nextStatus) {
		return nil
	}
	if _, err := m.c.UpdateStatus(ctx, next); err != nil && !api.IsConflict(err) && !api.IsNotFound(err) {
		return fmt.Errorf("update status of %s %s: %w", cur.GetTypeMeta().Kind, cur.GetObjectMeta().Name, err)
	}
	return nil
}

func equalStatus(a, b any) bool {
	strip := func(v any) any {
		rv := reflect.ValueOf(v).Elem()
		cp := reflect.New(rv.Type()).Elem()
		cp.Set(rv)
		f := cp.FieldByName("Conditions")
		conds := slices.Clone(f.Interface().([]metav1.Condition))
		for i := range conds {
			conds[i].LastTransitionTime = metav1.Time{}
		}
		f.Set(reflect.ValueOf(conds))
		return cp.Interface()
	}
	return reflect.DeepEqual(strip(a), strip(b))
}

func flavorUsage(c *cqState) []api.FlavorUsage { return flavorUsageOf(c, c.usage) }

// flavorUsageOf lists usage u in c's spec order, with what is borrowed.
func flavorUsageOf(c *cqState, u amounts) []api.FlavorUsage {
	var out []api.FlavorUsage
	for _, rg := range c.cq.Spec.ResourceGroups {
		for _, fq := range rg.Flavors {
			fu := api.FlavorUsage{Name: fq.Name}
			for _, rq := range fq.Resources {
				f := fr{fq.Name, rq.Name}
				n, _ := api.ResourceAmount(rq.Name, rq.NominalQuota)
				format := rq.NominalQuota.Format
				fu.Resources = append(fu.Resources, api.FlavorResourceUsage{Name: rq.Name,
					Total: api.AmountQuantity(rq.Name, u[f], format), Borrowed: api.AmountQuantity(rq.Name, max(0, u[f]-n), format)})
			}
			out = append(out, fu)
		}
	}
	return out
}
