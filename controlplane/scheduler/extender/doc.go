// Package extender talks to scheduler extenders: HTTP(S) services that
// the scheduler asks, beside its own plugins, which nodes a pod may run on
// (filter), how good each is (prioritize), which pods to evict
// (preempt) and to bind the pod (bind). It is Kubernetes' HTTPExtender
// (pkg/scheduler/extender.go) for skiff: the same configuration (a
// KubeSchedulerConfiguration's extenders:) and the same wire types
// (k8s.io/kube-scheduler/extender/v1, JSON keys the Go field names), so an
// extender written for kube-scheduler (HAMi's, a student's 40-line Python
// server) works unchanged.
//
// # The calls, as kube-scheduler makes them
//
//	POST URLPREFIX/FILTERVERB      ExtenderArgs{Pod, Nodes | NodeNames}
//	                               → ExtenderFilterResult{Nodes | NodeNames, FailedNodes, FailedAndUnresolvableNodes, Error}
//	POST URLPREFIX/PRIORITIZEVERB  ExtenderArgs → HostPriorityList [{Host, Score 0..10}]
//	POST URLPREFIX/PREEMPTVERB     ExtenderPreemptionArgs{Pod, NodeNameToVictims | NodeNameToMetaVictims}
//	                               → ExtenderPreemptionResult{NodeNameToMetaVictims}
//	POST URLPREFIX/BINDVERB        ExtenderBindingArgs{PodName, PodNamespace, PodUID, Node}
//	                               → ExtenderBindingResult{Error}
//
// nodeCacheCapable: the extender keeps its own node cache, so it gets and
// returns node names only. managedResources: the extender is asked only
// about pods that request one of them (none listed: about every pod).
// ignorable: when it cannot be reached or answers an error, the scheduler
// goes on without it; otherwise the pod is not scheduled this time (the
// error is its FailedScheduling message). httpTimeout bounds each call.
//
// # Invariants
//
//   - An Extender is safe for concurrent use; it holds no state beyond its
//     configuration and HTTP client.
//   - Every call carries ctx and the configured timeout; a call never
//     outlives either.
package extender
