// Package simnodes runs simulated nodes inside the control plane: N Node
// objects with chosen capacity and simulated GPUs, Ready, whose pods are
// "run" by one small controller instead of an agent and a container
// runtime. They let a student explore the scheduler on a thousand-node
// cluster from a laptop (`skiff up --sim-nodes 1000`) and let the
// benchmarks measure the scheduler and the API at scale.
//
// # What a simulated node is
//
// Just its Node object: labels kubernetes.io/hostname, skiff.dev/simulated
// "true", nvidia.com/gpu.product and nvidia.com/gpu.count; capacity and
// allocatable cpu, memory, pods and nvidia.com/gpu; a Ready condition. There
// is no agent, no runtime, no goroutine per node or per pod.
//
// # What runs
//
//   - Registration: the nodes are created (and their status written)
//     through the API by a bounded pool of writers, so the store's group
//     commit batches them; 1,000 nodes register in well under a second.
//     Each node brings its own pod CIDR (a /24 of 100.64.0.0/10), so the
//     node IPAM controller, whose 10.244.0.0/16 holds 256 nodes, leaves
//     them alone; pod IPs come from it.
//   - The pod controller: one informer on pods and one work loop with a few
//     workers. A pod bound to a simulated node becomes Running at once,
//     with a Running, ready status per container (init containers
//     Completed); a pod with a deletionTimestamp is deleted with grace
//     period 0, as an agent does once its containers have stopped. Like
//     every controller it works from current state: handlers only enqueue
//     keys, Reconcile is safe to repeat.
//   - Heartbeats: one goroutine renews every node's Ready heartbeat each
//     HeartbeatInterval, through the same bounded pool (batched commits),
//     so the node lifecycle controller keeps them Ready.
//
// # Why here and not in agent/
//
// The agent is the real node: it owns a runtime, devices, volumes and a
// server for logs and exec. Simulated nodes share none of that; what they
// need is the control plane's client and its informers, and they only exist
// inside a control-plane process. So they live next to the other
// in-process components (controllers, scheduler) and talk to them only
// through the API, exactly like remote agents.
//
// # Invariants
//
//   - Everything goes through client.Interface: a simulated node is held
//     to the same admission and validation as a real one.
//   - Only pods bound to this Sim's nodes are touched; real nodes' pods
//     are left to their agents.
//   - Objects from the informer are never modified: status writes copy.
//   - Start launches every goroutine under a WaitGroup; Stop cancels and
//     waits and is safe twice.
package simnodes
