// Package etcd runs an etcd member inside the skiff server process, for a
// control plane past one machine: the store of the field's distributed
// database (etcd, as Kubernetes and k3s use) instead of one bbolt file.
//
// A member is a name, a data directory, a client URL (where stores talk to
// it, over gRPC) and a peer URL (where members replicate to each other, by
// Raft). The first server starts a cluster of one (ClusterState "new",
// InitialCluster "NAME=PEERURL"). A server joining it first asks the
// cluster to add it (AddMember, which adds it as a learner and returns
// the InitialCluster the new member must start with), starts with
// ClusterState "existing", and once its member has caught up asks the
// cluster to promote it (PromoteMember) to a voting member. A learner
// copies the log without voting, so the cluster keeps its majority while
// the new member starts and catches up. A cluster of n voting members keeps
// serving while a majority (n/2+1) is up: three servers survive the loss of
// one. RemoveMember takes a member out for good.
//
// Invariants:
//   - StartEmbedded returns once the member serves clients (it has joined
//     or formed a quorum), or fails and leaves nothing running. A joining
//     member that asks a peer which has not applied AddMember yet ("member
//     count is unequal") starts again until its start timeout.
//   - Stop stops the member and closes its client; it is safe twice.
//   - A learner serves no client requests but the member list: a joining
//     server opens its store once WaitPromoted has returned.
//   - etcd's own logs go to the configured slog logger at warning level and
//     above (etcd is chatty at info).
package etcd
