// Package quota counts what a namespace holds against its ResourceQuotas
// and applies its LimitRanges: Kubernetes' quota evaluators
// (pkg/quota/v1/evaluator/core), the ResourceQuota admission's check
// (k8s.io/apiserver/pkg/admission/plugin/resourcequota) and the
// LimitRanger admission (plugin/pkg/admission/limitranger), with their
// words. The API server admits with it (controlplane/apiserver
// admission_quota.go, admission_limitrange.go); the resourcequota
// controller recounts with it (controlplane/controllers/resourcequota.go).
//
// # What is counted
//
//   - A pod that has not ended (nor passed its deletion grace period):
//     pods, count/pods, cpu and memory (its requests), requests.* and
//     limits.* of cpu, memory and ephemeral-storage, requests.EXTENDED
//     (requests.nvidia.com/gpu: extended resources are counted by request
//     only, they cannot be overcommitted), hugepages. An ended pod counts
//     for count/pods only.
//   - A service: services, count/services, services.nodeports (its ports
//     when NodePort or LoadBalancer), services.loadbalancers.
//   - A claim: persistentvolumeclaims, requests.storage, and both per
//     storage class (CLASS.storageclass.storage.k8s.io/...).
//   - configmaps, secrets, resourcequotas, and count/RESOURCE.GROUP of any
//     namespaced kind: one per object.
//
// # Admission and the controller agree
//
// status.used is exact: what the namespace's objects use, plus what
// admission has charged for objects being created. Admission (Check) adds
// an object's usage to every quota that covers it and records a
// Reservation on the quota (annotation ReservationsAnnotation: the
// object's resource and uid, when, how much) in the same write; the
// controller (Calculate) counts the objects it sees plus the reservations
// whose objects it does not see yet, and drops a reservation once its
// object is seen, or after ReservationTTL (a create that failed and could
// not release its charge). Both write with the quota's resourceVersion, so
// neither undoes the other: a write that lost a race is redone from the
// new state. A create that fails after its charge releases it at once.
//
// The one imprecision left is on the safe side: an object created and
// deleted between two counts keeps its charge until ReservationTTL.
package quota
