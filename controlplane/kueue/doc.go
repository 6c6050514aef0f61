// Package kueue is skiff's queue manager: the role of Kueue's controller
// manager (kubernetes-sigs/kueue v0.19) inside the control plane. It runs on
// the leader, beside the controllers.
//
// A Job labelled kueue.x-k8s.io/queue-name: LQ is created suspended (the
// API server's admission step, as Kueue's mutating webhook) and gets a
// Workload job-NAME-HASH (jobs.go): one pod set, main, of parallelism pods.
// The scheduling cycle (schedule.go) takes each ClusterQueue's pending
// workloads in its queueing strategy's order (priority, then time queued),
// assigns each resource the first flavor with room (quota.go: nominal
// quota, borrowing and lending within a cohort), and writes the admission
// into the Workload's status (QuotaReserved, Admitted). The job side then
// unsuspends the Job with the flavor's nodeLabels merged into its pod
// template's nodeSelector and the flavor's tolerations appended. A workload
// that does not fit stays pending with Kueue's words in its QuotaReserved
// condition ("couldn't assign flavors to pod set main: insufficient unused
// quota for nvidia.com/gpu in flavor default-flavor, 1 more needed").
//
// # Invariants
//
//   - Quota state lives only in the stored Workloads: usage is the sum of
//     the admissions of workloads that hold a reservation and have not
//     finished. Nothing else is kept across cycles but the admissions this
//     manager wrote and its cache has not seen yet (assumed), so a manager
//     started on the same store after a crash (kill -9) rebuilds exactly
//     the admitted set and usage, and an admission is one status write with
//     the workload's resourceVersion: it happens at most once.
//   - An eviction (preemption, PodsReadyTimeout) keeps the quota until the
//     Job is suspended and its pods are gone; only then is the reservation
//     cleared and the workload queued again.
//   - Objects read from the caches are never modified: copies are.
//
// # Beyond Kueue
//
// Positions (order.go) are computed from the same order the cycle uses:
// the visibility API (pendingworkloads) and `get workloads -o wide`
// answer from it, and describe explains what ran short and who holds it
// (explain.go).
package kueue
