package network

import (
	"context"
	"errors"
	"fmt"
)

// Retain tears down the network of every pod this node set up (libcni's
// cache of ADD results is the record) whose uid is not in live: pods
// deleted while the agent was down, or whose containers were never
// created. Safe to repeat.
func (c *CNI) Retain(ctx context.Context, live map[string]bool) error {
	atts, err := c.cni.GetCachedAttachments("")
	if err != nil {
		return fmt.Errorf("list pod networks: %w", err)
	}
	var errs []error
	seen := map[string]bool{}
	for _, a := range atts {
		if a.Network != c.cfg.NetworkName && a.Network != c.cfg.NetworkName+"-lo" {
			continue
		}
		if live[a.ContainerID] || seen[a.ContainerID] {
			continue
		}
		seen[a.ContainerID] = true
		var ns, name string
		for _, kv := range a.CniArgs {
			switch kv[0] {
			case "K8S_POD_NAMESPACE":
				ns = kv[1]
			case "K8S_POD_NAME":
				name = kv[1]
			}
		}
		errs = append(errs, c.TearDown(ctx, ns, name, a.ContainerID))
	}
	return errors.Join(errs...)
}

// Retain tears down the networks of pods not in live (see CNI.Retain);
// before the node has a pod CIDR there is nothing to do.
func (n *Node) Retain(ctx context.Context, live map[string]bool) error {
	c, err := n.get(ctx)
	if errors.Is(err, ErrNoPodCIDR) {
		return nil
	}
	if err != nil {
		return err
	}
	return c.Retain(ctx, live)
}
