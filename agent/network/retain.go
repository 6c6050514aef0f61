package network

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Retain tears down the network of every pod this node set up whose uid
// is not among live's: pods deleted while the agent was down, whose
// containers were never created, or whose tear-down was cut short. The
// records are libcni's cache of ADD results and the node's record of the
// namespaces it made (madeDir), read before live is called: SetUp records
// a namespace before it makes it, so a pod set up meanwhile is live.
// Safe to repeat.
func (c *CNI) Retain(ctx context.Context, live func() map[string]bool) error {
	made, err := madeNetNS(c.cfg.CacheDir)
	if err != nil {
		return err
	}
	atts, err := c.cni.GetCachedAttachments("")
	if err != nil {
		return fmt.Errorf("list pod networks: %w", err)
	}
	isLive := live()
	gone := map[string]bool{}
	for _, a := range atts {
		if (a.Network == c.cfg.NetworkName || a.Network == loopbackName(c.cfg.NetworkName)) && !isLive[a.ContainerID] {
			gone[a.ContainerID] = true
		}
	}
	for _, uid := range made {
		if !isLive[uid] {
			gone[uid] = true
		}
	}
	var errs []error
	for _, uid := range slices.Sorted(maps.Keys(gone)) {
		ns, name := podOf(atts, uid)
		errs = append(errs, c.TearDown(ctx, ns, name, uid))
	}
	return errors.Join(errs...)
}

// Retain tears down the networks of pods not among live's (see
// CNI.Retain); before the node has a pod CIDR there is nothing to do.
func (n *Node) Retain(ctx context.Context, live func() map[string]bool) error {
	c, err := n.get(ctx)
	if errors.Is(err, ErrNoPodCIDR) {
		return nil
	}
	if err != nil {
		return err
	}
	return c.Retain(ctx, live)
}
