package controllers

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// The node IPAM controller gives every Node a pod CIDR (spec.podCIDR): a
// /24 of the cluster CIDR 10.244.0.0/16, from which the node's CNI
// host-local IPAM hands out pod IPs (agent/network). Routes between the
// nodes' pod CIDRs follow from these. One reconcile of a node:
//
//  1. A node that has a pod CIDR keeps it (it is never changed).
//  2. Otherwise take the lowest /24 that no node in the cache holds and
//     this controller has not just handed out, and write it.
//
// The cache may not show a CIDR just written yet, so the controller also
// remembers what it handed out (by node name) until the node is gone
// from the cache; a restarted controller starts from the nodes' specs.
//
// Cost: a node that already has a pod CIDR (every node after its first
// reconcile, and nodes that bring their own, such as simulated ones) is
// settled by one cache lookup; only a node that needs a CIDR lists the
// nodes to find the used ones. Handler enqueues only such nodes (and
// deletions), so heartbeats, which update every node's status every few
// seconds, cost nothing here: without both, each heartbeat of each node
// listed every node, O(nodes²) per heartbeat round.
// It is done here rather than in the API server so that the API stays
// free of cluster policy, as in Kubernetes (kube-controller-manager
// --allocate-node-cidrs).
type NodeIPAMController struct {
	client      client.Interface
	nodes       Lister // *api.Node
	clusterCIDR netip.Prefix
	maskSize    int
	log         *slog.Logger

	mu       sync.Mutex
	assigned map[string]netip.Prefix // node name → CIDR written, maybe not yet cached
}

const nodeIPAMControllerName = "nodeipam-controller"

// DefaultClusterCIDR is where node pod CIDRs come from (flannel's and
// kubeadm's usual choice), cut into /24s: 256 nodes of 254 pods.
const (
	DefaultClusterCIDR  = "10.244.0.0/16"
	DefaultNodeMaskSize = 24
)

// NewNodeIPAMController returns the controller over a cache of all nodes;
// clusterCIDR is cut into prefixes of maskSize bits.
func NewNodeIPAMController(c client.Interface, nodes Lister, clusterCIDR netip.Prefix, maskSize int, log *slog.Logger) (*NodeIPAMController, error) {
	if !clusterCIDR.Addr().Is4() || maskSize < clusterCIDR.Bits() || maskSize > 30 {
		return nil, fmt.Errorf("node IPAM: cluster CIDR %s cut into /%d: want IPv4 and a mask between /%d and /30", clusterCIDR, maskSize, clusterCIDR.Bits())
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &NodeIPAMController{
		client:      c,
		nodes:       nodes,
		clusterCIDR: clusterCIDR.Masked(),
		maskSize:    maskSize,
		log:         log.With("controller", nodeIPAMControllerName),
		assigned:    map[string]netip.Prefix{},
	}, nil
}

// Reconcile gives node key a pod CIDR if it has none. Safe to repeat.
func (n *NodeIPAMController) Reconcile(ctx context.Context, key string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, name := splitKey(key)
	// Fast path, without listing: a node gone frees what we handed it; a
	// node with a pod CIDR keeps it; a deleted node gets none.
	if o, ok := n.nodes.Get("", name); !ok {
		delete(n.assigned, name)
		return nil
	} else if nd, ok := o.(*api.Node); !ok || nd.Spec.PodCIDR != "" || nd.DeletionTimestamp != nil {
		return nil
	}
	nodes := listAs[*api.Node](n.nodes.ListBy(nil, ""))
	used := map[netip.Prefix]bool{}
	present := map[string]bool{}
	var node *api.Node
	for _, nd := range nodes {
		present[nd.Name] = true
		if p, err := netip.ParsePrefix(nd.Spec.PodCIDR); err == nil {
			used[p.Masked()] = true
		}
		if nd.Name == name {
			node = nd
		}
	}
	for nm, p := range n.assigned {
		if !present[nm] {
			delete(n.assigned, nm) // node gone: its CIDR is free again
			continue
		}
		used[p] = true
	}
	if node == nil || node.Spec.PodCIDR != "" || node.DeletionTimestamp != nil {
		return nil
	}
	cidr, ok := n.assigned[name]
	if !ok {
		cidr, ok = n.next(used)
		if !ok {
			return fmt.Errorf("node %s: no pod CIDR left in %s", name, n.clusterCIDR)
		}
	}
	u := api.Clone(node)
	u.Spec.PodCIDR, u.Spec.PodCIDRs = cidr.String(), []string{cidr.String()}
	if _, err := n.client.Update(ctx, u); err != nil {
		if api.IsNotFound(err) {
			return nil
		}
		return requeueOnConflict(n.log, key, fmt.Errorf("set pod CIDR of node %s: %w", name, err))
	}
	n.assigned[name] = cidr
	logReconcile(n.log, true, name, "no pod CIDR", "a pod CIDR", "assigned "+cidr.String())
	return nil
}

// Handler enqueues what Reconcile has work for: a node added or updated
// without a pod CIDR, and a node deleted (its CIDR is free again).
// Updates of nodes that have one (status heartbeats, labels) are ignored.
func (n *NodeIPAMController) Handler(enqueue func(string)) client.Handler {
	needs := func(o api.Object) {
		if nd, ok := o.(*api.Node); ok && nd.Spec.PodCIDR == "" {
			enqueue(client.KeyFunc(nd))
		}
	}
	return client.Handler{
		OnAdd:    needs,
		OnUpdate: func(_, o api.Object) { needs(o) },
		OnDelete: func(o api.Object) { enqueue(client.KeyFunc(o)) },
	}
}

// next is the lowest free prefix of the cluster CIDR.
func (n *NodeIPAMController) next(used map[netip.Prefix]bool) (netip.Prefix, bool) {
	count := 1 << (n.maskSize - n.clusterCIDR.Bits())
	step := uint32(1) << (32 - n.maskSize)
	base := ipv4Uint(n.clusterCIDR.Addr())
	for i := range count {
		p := netip.PrefixFrom(uintIPv4(base+uint32(i)*step), n.maskSize)
		if !used[p] {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

func splitKey(key string) (namespace, name string) {
	for i := range len(key) {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}

func ipv4Uint(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func uintIPv4(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// newDefaultNodeIPAM is the controller over DefaultClusterCIDR in /24s,
// as the Manager runs it.
func newDefaultNodeIPAM(c client.Interface, nodes Lister, log *slog.Logger) *NodeIPAMController {
	r, err := NewNodeIPAMController(c, nodes, netip.MustParsePrefix(DefaultClusterCIDR), DefaultNodeMaskSize, log)
	if err != nil {
		panic(err) // constants: cannot happen
	}
	return r
}
