package agent

import (
	"context"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/backoff"
)

// Device changes reach the cluster at once: a GPU that fails (an Xid, a
// `skiff gpu fault`) leaves the Node's allocatable within a second instead
// of at the next 10 s heartbeat, so the scheduler stops counting it; and
// the GPU annotations (topology, free GPUs, allocations) follow every
// allocation. The device manager's Changed channel wakes deviceUpdates;
// changes that come while a write is in flight are coalesced into the
// next write, since the state is recomputed, never replayed.

// setAnnotations puts the agent's own annotations (Config.Annotations) on
// n, reporting whether anything changed. n must be the agent's own copy.
func (a *Agent) setAnnotations(ctx context.Context, n *api.Node) bool {
	changed := a.setDeviceLabels(n)
	if a.cfg.Annotations == nil {
		return changed
	}
	ann, err := a.cfg.Annotations(ctx)
	if err != nil {
		a.log.Warn("node annotations", "err", err)
		return changed
	}
	for k, v := range ann {
		if _, has := n.Annotations[k]; v == "" && has {
			delete(n.Annotations, k) // the agent's own, no longer true
			changed = true
			continue
		}
		if v != "" && n.Annotations[k] != v {
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations[k] = v
			changed = true
		}
	}
	return changed
}

// setDeviceLabels puts Config.DeviceLabels on n and removes the owned
// ones it no longer has, leaving the user's labels (Config.Labels) alone.
func (a *Agent) setDeviceLabels(n *api.Node) bool {
	if a.cfg.DeviceLabels == nil {
		return false
	}
	want := a.cfg.DeviceLabels()
	changed := false
	for k := range n.Labels {
		if _, user := a.cfg.Labels[k]; user {
			continue
		}
		if _, keep := want[k]; !keep && a.cfg.OwnedLabel != nil && a.cfg.OwnedLabel(k) {
			delete(n.Labels, k)
			changed = true
		}
	}
	for k, v := range want {
		if _, user := a.cfg.Labels[k]; user || n.Labels[k] == v {
			continue
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[k] = v
		changed = true
	}
	return changed
}

// deviceRetry is the backoff of a failed device write (the API server
// restarting, say): the heartbeat writes the status but not the
// annotations, so without a retry a pod's GPUs would stay in the Node's
// allocation records until the next device change.
var deviceRetry = backoff.Policy{Initial: 200 * time.Millisecond, Max: 5 * time.Second}

// deviceUpdates writes the Node's annotations and status after every
// device change, and again after a failed write until one succeeds, until
// ctx ends.
func (a *Agent) deviceUpdates(ctx context.Context) {
	if a.cfg.DevicesChanged == nil {
		return
	}
	ch := a.cfg.DevicesChanged()
	var retry <-chan time.Time // set while the last write failed
	b := backoff.Backoff{Policy: deviceRetry}
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-retry:
		}
		// Take the next channel before reading the state: a change during
		// the write closes it, and is written next round.
		ch = a.cfg.DevicesChanged()
		err := a.writeDeviceState(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			d := b.Next()
			a.log.Warn("write node status after a device change (will retry)", "err", err, "retryIn", d)
			retry = time.After(d)
			continue
		}
		retry = nil
		b.Reset()
	}
}

// writeDeviceState updates the Node's annotations (when they changed) and
// status, retrying on conflicts with the heartbeat.
func (a *Agent) writeDeviceState(ctx context.Context) error {
	kind := api.MustKindOf(&api.Node{})
	var err error
	for range 5 {
		var o api.Object
		if o, err = a.c.Get(ctx, kind, "", a.cfg.NodeName); err != nil {
			if api.IsNotFound(err) {
				return nil // the heartbeat registers the node again
			}
			return err
		}
		n := api.Clone(o.(*api.Node))
		if a.setAnnotations(ctx, n) {
			if o, err = a.c.Update(ctx, n); api.IsConflict(err) {
				continue
			} else if err != nil {
				return err
			}
			n = o.(*api.Node)
		}
		if err = a.writeStatus(ctx, n); !api.IsConflict(err) {
			return err
		}
	}
	return err
}
