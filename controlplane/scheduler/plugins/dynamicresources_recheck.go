package plugins

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// recheckSlices closes the scheduler's side of the ordering with a node's
// other way to its devices (the device plugin, agent/dra/gpudriver
// Driver.Withdraw): the allocator chose from the slices the informer had,
// which may still list a device the node has since taken out of its slice
// to hand it out through nvidia.com/gpu. After the allocations of wrote
// were written, the node's slices are read again from the API server; an
// allocation with a device of one of the node's pools that the pool's
// newest slices no longer list is taken back (status.allocation cleared
// and the pod left out of reservedFor, with the written resourceVersion as
// precondition) and the pod is not bound: it is tried again, from slices
// that no longer list the device. Whichever of the two writes came first,
// the side that wrote second sees the other's in its read, so no device
// is both allocated and handed out, and no claim waits for one.
//
// Pools without a slice of the node (network-attached devices) are not
// checked. A claim another pod reserved meanwhile (a shared claim) is
// not taken back from it: only this pod's reservation is withdrawn.
func (pl *DynamicResources) recheckSlices(ctx context.Context, node string, pod *api.Pod, wrote []*api.ResourceClaim) error {
	if len(wrote) == 0 {
		return nil
	}
	ss, _, err := client.List[*api.ResourceSlice](ctx, pl.client, "", api.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return fmt.Errorf("read the ResourceSlices of node %s again: %w", node, err)
	}
	listed := publishedDevices(ss)
	var errs []error
	for _, c := range wrote {
		gone := goneDevices(c.Status.Allocation, listed)
		if len(gone) == 0 {
			continue
		}
		err := fmt.Errorf("claim %s: %s left the ResourceSlices of node %s after the allocation was computed (the node hands it out otherwise)",
			api.Key(c.Namespace, c.Name), strings.Join(gone, ", "), node)
		if terr := pl.takeBack(ctx, c, pod); terr != nil {
			err = fmt.Errorf("%w; taking the allocation back: %w", err, terr)
		} else {
			err = fmt.Errorf("%w; allocation taken back, the pod is tried again", err)
		}
		pl.log.Info("allocation taken back", "err", err)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// poolKey names a pool: driver and pool name.
type poolKey struct{ driver, pool string }

// publishedDevices lists, per pool, the devices of its slices of the
// newest generation.
func publishedDevices(ss []*api.ResourceSlice) map[poolKey][]string {
	newest := map[poolKey]int64{}
	for _, s := range ss {
		k := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
		if g, ok := newest[k]; !ok || s.Spec.Pool.Generation > g {
			newest[k] = s.Spec.Pool.Generation
		}
	}
	out := map[poolKey][]string{}
	for _, s := range ss {
		k := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
		if s.Spec.Pool.Generation != newest[k] {
			continue
		}
		out[k] = append(out[k], "") // the pool is published, even with no device
		for _, d := range s.Spec.Devices {
			out[k] = append(out[k], d.Name)
		}
	}
	return out
}

// goneDevices are the devices of a the listed pools no longer have, as
// "device D of pool P".
func goneDevices(a *api.AllocationResult, listed map[poolKey][]string) []string {
	if a == nil {
		return nil
	}
	var out []string
	for _, r := range a.Devices.Results {
		devs, ok := listed[poolKey{r.Driver, r.Pool}]
		if ok && !slices.Contains(devs, r.Device) {
			out = append(out, fmt.Sprintf("device %s of pool %s (driver %s)", r.Device, r.Pool, r.Driver))
		}
	}
	return out
}

// takeBack clears the allocation this PreBind wrote to c and withdraws
// pod's reservation: c is the claim as written, its resourceVersion the
// precondition. On a conflict it reads the claim again, and gives up when
// the allocation is no longer the one written.
func (pl *DynamicResources) takeBack(ctx context.Context, c *api.ResourceClaim, pod *api.Pod) error {
	mine := c.Status.Allocation
	for attempt := 0; ; attempt++ {
		cur := claimForWrite(c)
		cur.Status.ReservedFor = slices.DeleteFunc(cur.Status.ReservedFor, func(r api.ResourceClaimConsumerReference) bool { return r.UID == pod.UID })
		if len(cur.Status.ReservedFor) == 0 {
			cur.Status.ReservedFor = nil
			cur.Status.Allocation = nil
		}
		_, err := pl.client.UpdateStatus(ctx, cur)
		if err == nil || !api.IsConflict(err) || attempt >= 2 {
			return err
		}
		if c, err = client.Get[*api.ResourceClaim](ctx, pl.client, c.Namespace, c.Name); err != nil {
			return err
		}
		if c.Status.Allocation == nil || !sameDevices(c.Status.Allocation, mine) {
			return nil // deallocated or allocated afresh by someone else
		}
	}
}
