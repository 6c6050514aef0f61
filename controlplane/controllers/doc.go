// Package controllers holds skiff's control loops: the part of the control
// plane that turns what users declare into what runs, like Kubernetes'
// kube-controller-manager.
//
// A control loop compares two things, over and over: the desired state (a
// Deployment asking for 3 replicas of a template) and the observed state
// (the ReplicaSets and Pods that exist now), and makes one small change that
// brings them closer (create a ReplicaSet, scale it, delete a Pod). It never
// acts on an event itself: informer handlers only put the object's key in a
// queue, and Reconcile(ctx, key) reads the current state from the caches and
// recomputes everything. So a lost, late or repeated event costs nothing, a
// reconcile is always safe to repeat, and a periodic resync repairs the rest.
//
// Each controller is one file, and the file's top comment is its algorithm:
//
//   - deployment.go: rollouts through ReplicaSets (RollingUpdate, Recreate,
//     history, undo, restart);
//   - replicaset.go: pods to match a count;
//   - daemonset.go: one pod per eligible node, rolled by revision
//     (daemonset_update.go; history.go keeps the ControllerRevisions);
//   - statefulset.go: pods with stable names, hostnames and claims, in order;
//   - cronjob.go: a Job at each time of a cron schedule;
//   - disruption.go: how many pods a PodDisruptionBudget lets go now;
//   - hpa.go: a HorizontalPodAutoscaler's target scaled to keep its
//     metrics near their targets (hpa_compute.go reads each metric,
//     hpa_replicas.go is Kubernetes' replica calculator, hpa_behavior.go
//     its stabilization and rate limits, hpa_metrics.go the metrics APIs);
//   - gc.go: the garbage collector, deleting what lost all its owners;
//   - namespace.go: empty a namespace being deleted, then finalize it;
//   - endpoints.go: an Endpoints object per Service, listing its ready pods;
//   - nodeipam.go: a pod CIDR for every node;
//   - nodelifecycle.go: unreachable nodes tainted, their pods evicted.
//
// controllers.go wires them to informers and loops (client.Loop). The
// informers come from the process's shared client.InformerFactory
// (Options.Informers; the scheduler and the queue manager read the same
// caches): a new controller asks it for the kinds it reads
// (m.informer), adds its handlers, and its loop starts once they synced. Each
// reconcile logs one line, msg=reconcile with the key and what the loop
// observed, desired and did (logReconcile): read those to watch the loops
// think (`skiff up -v`; -vv adds the reconciles that changed nothing).
package controllers
