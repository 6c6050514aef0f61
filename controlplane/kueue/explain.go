package kueue

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// # Why a workload waits (beyond Kueue)
//
// Kueue says what ran short in the QuotaReserved condition ("insufficient
// unused quota for nvidia.com/gpu in flavor default-flavor, 1 more
// needed") and nothing more; its users ask which workloads hold the quota
// and what would free it (kueue#189, #2833). Explain answers from the
// state now, at read time: it builds the same snapshot as a scheduling
// cycle from the stored objects (no status field is added, so nothing is
// written and nothing can go stale in the store) and runs the same flavor
// assignment for the workload alone. What it says can differ from the
// condition written at the last cycle when things changed since; the
// condition stays Kueue's word, the explanation is skiff's.

// Explanation says why a pending workload waits.
type Explanation struct {
	// ClusterQueue the workload's LocalQueue points at ("" when none).
	ClusterQueue string
	// Position in its queues (nil when not pending).
	Position *Position
	// Ahead: pending workloads the cycle considers before this one.
	Ahead int32
	// Reasons are what keeps it out besides quota (a missing queue, a
	// stopped ClusterQueue, a backoff, a StrictFIFO head), or that it fits
	// now; in skiff's words.
	Reasons []string
	// Shortages: each flavor-resource that ran short.
	Shortages []Shortage
}

// Shortage is one flavor-resource that ran short.
type Shortage struct {
	Flavor, Resource string
	// Requested by the workload; Nominal quota, Used now and Available
	// (with what the cohort lends) in the ClusterQueue; Needed more.
	Requested, Nominal, Used, Available, Needed string
	// Max is what the ClusterQueue can ever have when the request is more
	// than that (Never: it cannot fit until the quota changes).
	Max   string
	Never bool
	// Holders are the admitted workloads charging this flavor-resource
	// in the ClusterQueue or its cohort, oldest admission first.
	Holders []Holder
	// Frees says what would make room, in skiff's words.
	Frees []string
}

// Holder is an admitted workload holding quota.
type Holder struct {
	Namespace, Name, ClusterQueue string
	Amount                        string
	Priority                      int32
	// Since the quota was reserved.
	Since time.Time
	// Evicted: being evicted (its quota returns once its pods are gone).
	Evicted bool

	amount int64
}

// Explain reads the queue state through c (cluster-wide lists of
// Workloads, ClusterQueues, LocalQueues, ResourceFlavors, Topologies and
// Namespaces) and explains the workload namespace/name. It returns nil
// when the workload is not pending.
func Explain(ctx context.Context, c client.Interface, namespace, name string, now time.Time) (*Explanation, error) {
	m := NewForTest(c, DefaultConfig(), nil, func() time.Time { return now })
	s, err := m.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(s.workloads, func(w *api.Workload) bool { return w.Namespace == namespace && w.Name == name })
	if i < 0 {
		return nil, api.NewNotFound(workloadKind, name)
	}
	wl := s.workloads[i]
	if !isPending(wl) {
		return nil, nil
	}
	e := &Explanation{}
	lqs := make([]*api.LocalQueue, 0, len(s.lqs))
	for _, lq := range s.lqs {
		lqs = append(lqs, lq)
	}
	if p, ok := Positions(s.workloads, lqs)[api.Key(namespace, name)]; ok {
		e.Position, e.Ahead = &p, p.InClusterQueue
	}
	lq := s.lqs[api.Key(wl.Namespace, wl.Spec.QueueName)]
	if lq == nil {
		e.Reasons = append(e.Reasons, fmt.Sprintf("LocalQueue %s doesn't exist in namespace %s", wl.Spec.QueueName, wl.Namespace))
		return e, nil
	}
	e.ClusterQueue = lq.Spec.ClusterQueue
	cs := s.cqs[lq.Spec.ClusterQueue]
	if cs == nil {
		e.Reasons = append(e.Reasons, fmt.Sprintf("ClusterQueue %s doesn't exist", lq.Spec.ClusterQueue))
		return e, nil
	}
	if p := cs.cq.Spec.StopPolicy; p != nil && *p != api.StopPolicyNone {
		e.Reasons = append(e.Reasons, fmt.Sprintf("ClusterQueue %s is stopped (stopPolicy %s)", cs.cq.Name, *p))
	}
	if missing := s.missingFlavors(cs); len(missing) > 0 {
		e.Reasons = append(e.Reasons, fmt.Sprintf("ClusterQueue %s references missing ResourceFlavor(s): %v", cs.cq.Name, missing))
	}
	if !s.namespaceMatches(cs, wl) {
		e.Reasons = append(e.Reasons, fmt.Sprintf("namespace %s doesn't match the namespaceSelector of ClusterQueue %s", wl.Namespace, cs.cq.Name))
	}
	if rs := wl.Status.RequeueState; rs != nil && rs.RequeueAt != nil && rs.RequeueAt.After(now) {
		e.Reasons = append(e.Reasons, fmt.Sprintf("backing off after an eviction until %s (%s from now)", rs.RequeueAt.UTC().Format(time.RFC3339), rs.RequeueAt.Sub(now).Round(time.Second)))
	}
	a := s.assign(cs, wl)
	if a.fits() {
		e.Reasons = append(e.Reasons, fitsNow(cs, e.Ahead))
		return e, nil
	}
	req := map[string]int64{}
	for i := range wl.Spec.PodSets {
		for r, v := range podSetRequests(&wl.Spec.PodSets[i]) {
			req[r] += v
		}
	}
	short := maps.Clone(a.short)
	for f := range a.over {
		short[f] = 0
	}
	for _, f := range slices.SortedFunc(maps.Keys(short), func(x, y fr) int { return cmp.Or(cmp.Compare(x.flavor, y.flavor), cmp.Compare(x.resource, y.resource)) }) {
		e.Shortages = append(e.Shortages, s.shortage(cs, f, req[f.resource], a))
	}
	return e, nil
}

// fitsNow says why a workload that fits still waits.
func fitsNow(cs *cqState, ahead int32) string {
	if cs.cq.Spec.QueueingStrategy == api.StrictFIFO && ahead > 0 {
		return fmt.Sprintf("it fits, but ClusterQueue %s is StrictFIFO and %d workload(s) ahead of it wait first", cs.cq.Name, ahead)
	}
	return "it fits the quota now: the next admission cycle admits it"
}

func (s *snapshot) shortage(cs *cqState, f fr, requested int64, a *assignment) Shortage {
	res := f.resource
	n, _, _, _ := cs.quota(f)
	sh := Shortage{Flavor: f.flavor, Resource: res, Requested: amountString(res, requested), Nominal: amountString(res, n),
		Used: amountString(res, cs.usage[f]), Available: amountString(res, s.available(cs, f))}
	if pot, ok := a.over[f]; ok {
		sh.Never, sh.Max = true, amountString(res, pot)
		sh.Frees = append(sh.Frees, fmt.Sprintf("nothing that finishes: the request (%s) is more than ClusterQueue %s can ever have (%s); raise nominalQuota of %s in flavor %s to at least %s",
			sh.Requested, cs.cq.Name, sh.Max, res, f.flavor, amountString(res, api.AddAmounts(n, requested-pot))))
		return sh
	}
	need := a.short[f]
	sh.Needed = amountString(res, need)
	for _, m := range s.members(cs) {
		if m != cs && !borrowing(m, amounts{f: 1}) {
			continue // within its own quota: its finishing lends nothing more
		}
		for _, v := range m.admitted {
			if u := admissionUsage(v.Status.Admission)[f]; u > 0 {
				h := Holder{Namespace: v.Namespace, Name: v.Name, ClusterQueue: m.cq.Name, Amount: amountString(res, u), amount: u, Priority: priorityOf(v),
					Evicted: apimeta.IsStatusConditionTrue(v.Status.Conditions, api.WorkloadEvicted)}
				if c := apimeta.FindStatusCondition(v.Status.Conditions, api.WorkloadQuotaReserved); c != nil {
					h.Since = c.LastTransitionTime.Time
				}
				sh.Holders = append(sh.Holders, h)
			}
		}
	}
	slices.SortStableFunc(sh.Holders, func(x, y Holder) int {
		return cmp.Or(x.Since.Compare(y.Since), cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name))
	})
	// The fewest holders, oldest first, whose release covers the need.
	var freed int64
	var names []string
	for _, h := range sh.Holders {
		if freed >= need {
			break
		}
		freed += h.amount
		names = append(names, h.Namespace+"/"+h.Name)
	}
	if freed >= need && len(names) > 0 {
		verb := "finishing"
		if len(names) > 1 {
			verb = "finishing (all of them)"
		}
		sh.Frees = append(sh.Frees, fmt.Sprintf("%s %s frees %s", strings.Join(names, ", "), verb, amountString(res, freed)))
	}
	sh.Frees = append(sh.Frees, fmt.Sprintf("raising nominalQuota of %s in flavor %s of ClusterQueue %s from %s to %s",
		res, f.flavor, cs.cq.Name, sh.Nominal, amountString(res, api.AddAmounts(n, need))))
	if p := cs.cq.Spec.Preemption; p == nil || p.WithinClusterQueue == "" || p.WithinClusterQueue == api.KueuePreemptNever {
		sh.Frees = append(sh.Frees, fmt.Sprintf("ClusterQueue %s never preempts within itself (preemption.withinClusterQueue: Never): a higher priority does not make room", cs.cq.Name))
	}
	return sh
}
