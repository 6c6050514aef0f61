package network

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"skiff.dev/skiff/agent/podworker"
	"skiff.dev/skiff/api"
)

// ErrNoPodCIDR means the node has no pod CIDR yet: the control plane's
// node IPAM controller gives one shortly after the node registers, so the
// pod worker retries.
var ErrNoPodCIDR = errors.New("the node has no pod CIDR yet")

// PodCIDRFunc reads the node's spec.podCIDR ("" while none is allocated).
type PodCIDRFunc func(ctx context.Context) (string, error)

// Node is the pod network of a node whose pod CIDR is only known once the
// control plane has allocated it: the CNI network is built on the first
// SetUp that finds a CIDR, from template with PodCIDR filled in. Until
// then SetUp fails with ErrNoPodCIDR; TearDown of a pod never set up is a
// no-op. Safe for concurrent use.
type Node struct {
	template Config
	podCIDR  PodCIDRFunc

	mu  sync.Mutex
	cni *CNI
}

var _ podworker.Network = (*Node)(nil)

// NewNode returns the pod network of a node; template's PodCIDR is
// ignored.
func NewNode(template Config, podCIDR PodCIDRFunc) *Node {
	return &Node{template: template, podCIDR: podCIDR}
}

func (n *Node) get(ctx context.Context) (*CNI, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cni != nil {
		return n.cni, nil
	}
	cidr, err := n.podCIDR(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the node's pod CIDR: %w", err)
	}
	if cidr == "" {
		return nil, ErrNoPodCIDR
	}
	cfg := n.template
	cfg.PodCIDR = cidr
	c, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if err := cfg.WriteConfFile(); err != nil {
		return nil, err
	}
	n.cni = c
	return c, nil
}

// SetUp sets up pod's network once the node has a pod CIDR.
func (n *Node) SetUp(ctx context.Context, pod *api.Pod) (podworker.PodNetwork, error) {
	c, err := n.get(ctx)
	if err != nil {
		return podworker.PodNetwork{}, fmt.Errorf("set up network of pod %s: %w", api.KeyOf(pod), err)
	}
	return c.SetUp(ctx, pod)
}

// TearDown tears down pod uid's network. Before the node has a pod CIDR
// no pod can have one, except after an agent restart: then the CIDR is
// read (it is there by then) and CNI DEL runs.
func (n *Node) TearDown(ctx context.Context, namespace, name, uid string) error {
	c, err := n.get(ctx)
	if errors.Is(err, ErrNoPodCIDR) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("tear down network of pod %s/%s: %w", namespace, name, err)
	}
	return c.TearDown(ctx, namespace, name, uid)
}
