package kueue

import (
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/kueue/queueorder"
)

// The order of pending workloads, as Kueue's ClusterQueue heap
// (pkg/cache/queue, queueOrdering): higher priority first, then the time
// the workload was queued (its creation, or its last requeue after a
// PodsReadyTimeout eviction), then its name for a stable order. Both
// queueing strategies use it; they differ in what a workload that does not
// fit does to the ones behind it (schedule.go). It lives in
// controlplane/kueue/queueorder, which the API server (the visibility API
// and the positions in the Table of workloads) uses without depending on
// the manager.

// Position is where a pending workload stands, counted from 0 as Kueue's
// visibility API counts (positionInClusterQueue, positionInLocalQueue).
type Position = queueorder.Position

// Pending is one pending workload with its position.
type Pending = queueorder.Pending

func isPending(wl *api.Workload) bool     { return queueorder.IsPending(wl) }
func holdsQuota(wl *api.Workload) bool    { return queueorder.HoldsQuota(wl) }
func priorityOf(wl *api.Workload) int32   { return queueorder.PriorityOf(wl) }
func queuedAt(wl *api.Workload) time.Time { return queueorder.QueuedAt(wl) }
func compareQueued(a, b *api.Workload) int {
	return queueorder.Compare(a, b)
}

// Positions returns the position of every pending workload of wls whose
// LocalQueue (in lqs) exists, by "namespace/name".
func Positions(wls []*api.Workload, lqs []*api.LocalQueue) map[string]Position {
	return queueorder.Positions(wls, lqs)
}
