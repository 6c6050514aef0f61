// Package queueorder is the order of pending Kueue workloads and their
// positions, shared by the queue manager (controlplane/kueue), the API
// server (the visibility API, the positions in the Table of workloads) and
// the CLI. It depends on api and client only, so the API server can use
// it without depending on the manager.
package queueorder

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/table"
	"skiff.dev/skiff/client"
)

// The order of pending workloads, as Kueue's ClusterQueue heap
// (pkg/cache/queue, queueOrdering): higher priority first, then the time
// the workload was queued (its creation, or its last requeue after a
// PodsReadyTimeout eviction), then its name for a stable order. Both
// queueing strategies use it; they differ in what a workload that does not
// fit does to the ones behind it (schedule.go).

// Position is where a pending workload stands, counted from 0 as Kueue's
// visibility API counts (positionInClusterQueue, positionInLocalQueue).
type Position struct {
	ClusterQueue   string
	InClusterQueue int32
	LocalQueue     string
	InLocalQueue   int32
}

// IsPending: waiting for quota (no reservation, not finished, active).
func IsPending(wl *api.Workload) bool {
	return !apimeta.IsStatusConditionTrue(wl.Status.Conditions, api.WorkloadQuotaReserved) &&
		!apimeta.IsStatusConditionTrue(wl.Status.Conditions, api.WorkloadFinished) &&
		(wl.Spec.Active == nil || *wl.Spec.Active) && wl.DeletionTimestamp == nil
}

// HoldsQuota: a reservation not yet released (an evicted workload holds it
// until its pods are gone).
func HoldsQuota(wl *api.Workload) bool {
	return wl.Status.Admission != nil && apimeta.IsStatusConditionTrue(wl.Status.Conditions, api.WorkloadQuotaReserved) &&
		!apimeta.IsStatusConditionTrue(wl.Status.Conditions, api.WorkloadFinished)
}

func PriorityOf(wl *api.Workload) int32 {
	if wl.Spec.Priority != nil {
		return *wl.Spec.Priority
	}
	return 0
}

// QueuedAt: creation, or the last PodsReadyTimeout eviction (Kueue's
// requeuingTimestamp: Eviction).
func QueuedAt(wl *api.Workload) time.Time {
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, api.WorkloadEvicted); c != nil && c.Reason == api.WorkloadEvictedByPodsReadyTimeout {
		return c.LastTransitionTime.Time
	}
	return wl.CreationTimestamp.Time
}

// Compare orders pending workloads.
func Compare(a, b *api.Workload) int {
	if c := cmp.Compare(PriorityOf(b), PriorityOf(a)); c != 0 {
		return c
	}
	if c := QueuedAt(a).Compare(QueuedAt(b)); c != 0 {
		return c
	}
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// Pending is one pending workload with its position.
type Pending struct {
	Workload *api.Workload
	Position Position
}

// PendingInOrder returns the pending workloads of wls whose LocalQueue (in
// lqs) exists, in the order the scheduling cycle takes them, with their
// positions.
func PendingInOrder(wls []*api.Workload, lqs []*api.LocalQueue) []Pending {
	lqCQ := map[string]string{}
	for _, lq := range lqs {
		lqCQ[api.Key(lq.Namespace, lq.Name)] = lq.Spec.ClusterQueue
	}
	var pending []*api.Workload
	for _, wl := range wls {
		if _, ok := lqCQ[api.Key(wl.Namespace, wl.Spec.QueueName)]; ok && IsPending(wl) {
			pending = append(pending, wl)
		}
	}
	slices.SortFunc(pending, Compare)
	out := make([]Pending, 0, len(pending))
	inCQ, inLQ := map[string]int32{}, map[string]int32{}
	for _, wl := range pending {
		lqk := api.Key(wl.Namespace, wl.Spec.QueueName)
		cq := lqCQ[lqk]
		out = append(out, Pending{Workload: wl, Position: Position{ClusterQueue: cq, InClusterQueue: inCQ[cq], LocalQueue: wl.Spec.QueueName, InLocalQueue: inLQ[lqk]}})
		inCQ[cq]++
		inLQ[lqk]++
	}
	return out
}

// Positions returns the position of every pending workload of wls whose
// LocalQueue (in lqs) exists, by "namespace/name".
func Positions(wls []*api.Workload, lqs []*api.LocalQueue) map[string]Position {
	p := PendingInOrder(wls, lqs)
	out := make(map[string]Position, len(p))
	for _, e := range p {
		out[api.Key(e.Workload.Namespace, e.Workload.Name)] = e.Position
	}
	return out
}

// ListPending reads the Workloads and LocalQueues of namespace ns ("" for
// all) through c and returns PendingInOrder of them. Positions in a
// ClusterQueue are only right when ns is "": a ClusterQueue spans
// namespaces.
func ListPending(ctx context.Context, c client.Interface, ns string) ([]Pending, error) {
	wls, _, err := client.List[*api.Workload](ctx, c, ns, api.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list workloads: %w", err)
	}
	lqs, _, err := client.List[*api.LocalQueue](ctx, c, ns, api.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list localqueues: %w", err)
	}
	return PendingInOrder(wls, lqs), nil
}

// TablePositions are the positions of pending by "namespace/name", as
// api/table's workload printer takes them.
func TablePositions(pending []Pending) map[string]table.WorkloadPosition {
	out := make(map[string]table.WorkloadPosition, len(pending))
	for _, p := range pending {
		out[api.Key(p.Workload.Namespace, p.Workload.Name)] = table.WorkloadPosition{InClusterQueue: p.Position.InClusterQueue, InLocalQueue: p.Position.InLocalQueue}
	}
	return out
}
