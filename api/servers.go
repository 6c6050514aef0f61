package api

import (
	"net/http"
	"net/url"
)

// The API skiff's servers speak among themselves and to `skiff server`'s
// subcommands, beside the Kubernetes API (behind the admin token): who
// leads a cluster of servers on etcd, and the etcd membership of servers
// that join one (controlplane/ha.go serves it).

// JoinPath is the API path a joining server posts JoinRequest to.
const JoinPath = "/skiff/v1/etcd/members"

// LeaderPath answers who leads (LeaderStatus).
const LeaderPath = "/skiff/v1/leader"

// MemberPath is the API path of the etcd member name, below JoinPath:
// POST MemberPath(name)+"/promote" makes the learner a voting member (a
// joining server asks once its member runs), DELETE removes the member
// (`skiff server remove-member`). Both take the token, as JoinPath.
func MemberPath(name string) string { return JoinPath + "/" + url.PathEscape(name) }

// JoinRequest asks a server to add a member to the cluster's etcd.
type JoinRequest struct {
	// Name of the new member, unique in the cluster.
	Name string `json:"name"`
	// PeerURL the other members reach it at.
	PeerURL string `json:"peerURL"`
}

// JoinResponse is what the new member starts with.
type JoinResponse struct {
	// InitialCluster is etcd's --initial-cluster: every member,
	// name=peerURL, comma-separated, the new one included.
	InitialCluster string `json:"initialCluster"`
}

// LeaderInfo names a leader: what its election key holds.
type LeaderInfo struct {
	// Name is the server's name (its gossip member name).
	Name string `json:"name"`
	// APIServer is the URL of its API server.
	APIServer string `json:"apiServer,omitempty"`
}

// LeaderStatus is the answer of LeaderPath.
type LeaderStatus struct {
	// Leader is who leads now; empty while nobody does.
	Leader LeaderInfo `json:"leader"`
	// Self is the server that answered.
	Self LeaderInfo `json:"self"`
	// Leading reports whether the server that answered leads.
	Leading bool `json:"leading"`
}

// IsServiceUnavailable reports whether err is a 503 Service Unavailable
// answer: the cluster cannot do it yet (etcd takes one new member at a
// time), ask again.
func IsServiceUnavailable(err error) bool { return StatusOf(err).Code == http.StatusServiceUnavailable }
