// Package scenario runs a scheduling scenario: a file that describes
// simulated nodes, a timeline of steps (create and delete pods, Jobs,
// Deployments; fail a node; let time pass) and what should then be true
// of the placements (this pod on a node of NVLink domain A, these two
// pods never on one node, at most N GPUs stranded on partly used nodes).
// It is skiff's answer to kube-scheduler-simulator's scenarios (KEP-140):
// a teacher writes the homework's question once, as a scenario with
// expectations, and checks every student's scheduler configuration
// against it (`skiff scenario run FILE --config STUDENT.yaml`).
//
// # The file
//
// `apiVersion: skiff.dev/v1alpha1`, `kind: Scenario` (file.go), decoded
// strictly: an unknown field is an error naming its path
// (steps[2].expect[0].onNod). Paths in it (a cluster file, manifests,
// scheduler configurations) are relative to the scenario file.
//
// # How it runs
//
// Each configuration gets its own in-process cluster, assembled as
// `skiff up --sim-nodes` assembles one (cluster.StartControlPlane and
// cluster.StartSimNodes): the API server, the controllers, the queue
// manager and the scheduler under that KubeSchedulerConfiguration, on a
// fresh store in a temporary directory, with simulated nodes (package
// controlplane/simnodes) whose pods run at once. Nothing runs in
// containers, so a step takes milliseconds. Steps run in order; after
// each, the runner waits until the cluster has settled (settle.go), a
// condition read from the API and the scheduler's queue, never a sleep:
//
//   - every pod bound to a live node is Running (or finished), every
//     unbound pod waits in the scheduler's unschedulable queue (it was
//     tried and fits nowhere), and no pod is being deleted;
//   - every Job has the pods its parallelism asks for, every Deployment
//     and ReplicaSet its replicas;
//   - a failed node's pods are gone.
//
// Then it prints each new placement with the scheduler's per-node
// reasons (the pod's trace: which plugin rejected each node, each
// feasible node's score), GPU utilisation and fragmentation, and checks
// the step's expectations (expect.go).
//
// # Simulated time
//
// The scenario keeps its own clock. `advance: 10m` moves it: the pods of
// an apply step with `runFor` whose time is up complete (Succeeded, as
// their containers exiting 0), so their Jobs finish and their GPUs free.
// A failed node (`failNode`) is reported dead by the cluster's member
// view at once, as gossip reports a crashed machine, and its pods are
// evicted at once: the eviction timeout passes in simulated time.
//
// # Invariants
//
//   - A scenario with an error in it runs nothing: Load reports every
//     problem at once, with its path.
//   - Every configuration runs the same steps on a cluster of its own;
//     nothing is shared between them.
//   - Run returns an error naming each unmet expectation (configuration,
//     step, expectation and what was found instead); the CLI exits
//     non-zero on it.
package scenario
