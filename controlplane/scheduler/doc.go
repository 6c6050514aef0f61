// Package scheduler decides which node each pending pod runs on.
//
// A scheduler is a loop. It takes the next pod that has no node from a
// queue (highest priority first). It looks at every node and asks its
// filter plugins "can this pod run here?": enough free cpu, memory and
// nvidia.com/gpu, matching labels, tolerated taints, a Ready node, free
// host ports. Among the nodes that pass, score plugins rank "how good is
// it here?" (spread out or pack tight, GPU topology) and the highest total
// wins. The scheduler then binds the pod to that node through the API;
// the node's agent starts it. If no node passes, the pod waits with a
// message saying why ("0/3 nodes are available: 3 Insufficient
// nvidia.com/gpu.") until the cluster changes, or evicts lower-priority
// pods to make room (preemption).
//
// # Where things are
//
//	framework/   the extension points (PreFilter, Filter, Score, Reserve, Bind), Status, NodeInfo
//	plugins/     one plugin per file: NodeResourcesFit, NodeAffinity, TaintToleration, ...
//	queue.go     activeQ, backoffQ, unschedulableQ, and what moves pods between them
//	cache.go     nodes and their pods, including "assumed" pods not yet confirmed bound
//	nodesummary.go  what all nodes share (label counts, cordoned, tainted, not Ready):
//	             a pod no node can take is turned away without visiting each node
//	schedule.go  one decision: filter all nodes, score the feasible ones, pick one; the message
//	scheduler.go one cycle around the decision: assume, bind, report, retry
//	preemption.go  evicting lower-priority pods when nothing fits
//	explain.go   the per-node, per-plugin record of an attempt (trace spans, Explain)
//	config/      the KubeSchedulerConfiguration: profiles, plugins, their args
//	profiles.go  one framework per profile (schedulerName), built from its configuration
//	reload.go    a changed configuration file applied while running
//	run.go       informers and goroutines: the scheduler as a running component
//
// # Invariants
//
//   - One scheduling cycle at a time, each on a snapshot of the cache. A pod
//     chosen for a node is assumed there before its binding is written, so
//     the next cycle already sees its requests: two pods never both take
//     the last GPU.
//   - A failed binding forgets the assumed pod, freeing its room, and the
//     pod is retried after a backoff.
//   - Objects from the informers are shared and never modified; status
//     writes copy first.
//   - Decisions are deterministic: the same cluster and pod give the same
//     node (ties go to the first node name), which makes them explainable.
//
// Kubernetes' kube-scheduler (k8s.io/kubernetes/pkg/scheduler) has the same
// shape and names; this is the part of it a course needs, small enough to
// read in an afternoon.
package scheduler
