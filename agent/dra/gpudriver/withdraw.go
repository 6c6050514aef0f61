package gpudriver

import (
	"context"
	"fmt"
)

// Withdraw is the device manager's confirmation of a pick
// (devices.Config.Confirm): the GPUs it is about to hand out through
// nvidia.com/gpu leave the node's ResourceSlice (one write, a new pool
// generation), then the claims are read afresh (Refresh), in that order
// through the API server. After it returns, Held counts every claim
// allocated before the slice without those GPUs was written; a claim
// allocated after that was allocated from a slice that no longer lists
// them, which the scheduler finds when it reads the slice again after
// writing the allocation, and takes back (controlplane/scheduler/plugins
// DynamicResources.PreBind). So no GPU ends up with both.
//
// release ends the withdrawal: call it once the device manager recorded
// the pick (its checkpoint keeps the GPUs out of the slice from then on)
// or gave it up (the GPUs are published again). On an error nothing is
// withdrawn. Without a Client only the withdrawal is kept.
func (d *Driver) Withdraw(ctx context.Context, uuids []string) (release func(), err error) {
	d.mu.Lock()
	for _, u := range uuids {
		d.withdrawn[u]++
	}
	d.mu.Unlock()
	release = func() {
		d.mu.Lock()
		for _, u := range uuids {
			if d.withdrawn[u]--; d.withdrawn[u] <= 0 {
				delete(d.withdrawn, u)
			}
		}
		d.mu.Unlock()
		select { // Run publishes again (nothing to write when the pick was recorded)
		case d.republish <- struct{}{}:
		default:
		}
	}
	if d.cfg.Client == nil {
		return release, nil
	}
	if err := d.Publish(ctx); err != nil {
		release()
		return nil, fmt.Errorf("withdraw GPUs %v from the ResourceSlice: %w", uuids, err)
	}
	if err := d.Refresh(ctx); err != nil {
		release()
		return nil, fmt.Errorf("withdraw GPUs %v: %w", uuids, err)
	}
	return release, nil
}
