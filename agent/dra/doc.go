// Package dra is the kubelet side of Dynamic Resource Allocation on a
// node: the DRA manager. Its drivers (agent/dra/gpudriver, or any other)
// are gRPC servers on unix sockets; the manager finds them, and asks them
// to prepare a pod's ResourceClaims before the pod's containers start.
//
// The sequence, as the kubelet's:
//
//  1. Registration (k8s.io/kubelet/pkg/apis/pluginregistration/v1): a
//     driver puts a registration socket in the registry directory
//     (kubelet: /var/lib/kubelet/plugins_registry). The manager watches
//     the directory (fsnotify), dials each new socket, calls GetInfo
//     (type DRAPlugin, the driver's name, its DRA socket, the service
//     versions, which must include v1.DRAPlugin), and answers with
//     NotifyRegistrationStatus. A socket that goes away unregisters it.
//  2. Prepare (k8s.io/kubelet/pkg/apis/dra/v1, NodePrepareResources):
//     before a pod's containers are created, the manager reads each of
//     the pod's claims (spec.resourceClaims, the template's claim named
//     in status.resourceClaimStatuses), checks that it is allocated and
//     reserved for the pod, and asks each driver of its allocation to
//     prepare it. The answer's CDI device IDs go to the containers that
//     list the claim (or one of its requests) in resources.claims.
//  3. Unprepare (NodeUnprepareResources): when the last pod on this node
//     that uses a claim ends, the manager asks the drivers to unprepare it.
//
// # Invariants
//
//   - Prepared claims, with the pods that use them and the drivers'
//     answers, are in a checkpoint (DATA-DIR/dra/dra_manager_state.json,
//     replaced atomically) written before Prepare returns, so a restarted
//     agent knows what to unprepare; a damaged file is refused with a
//     recovery message (CheckpointError).
//   - Prepare is idempotent per pod: a claim the checkpoint has prepared
//     is answered from it, without asking the driver again.
//   - A claim is unprepared only when no pod on this node uses it any more,
//     and forgotten only once its drivers said it is unprepared.
package dra
