package plugins

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/controlplane/scheduler/framework"
)

// PreBind implements framework.PreBindPlugin: write Reserve's decision,
// then wait until every claim of the pod is bound (the persistent volume
// controller binds a reserved volume; the node's provisioner makes one for
// a claim annotated with the node), at most BindTimeout. A failure
// unreserves the pod and it is tried again.
func (pl *VolumeBinding) PreBind(ctx context.Context, state *framework.CycleState, pod *api.Pod, nodeName string) *framework.Status {
	d, ok := state.Read(volumeBindingStateKey)
	if !ok {
		return nil
	}
	s := d.(*volumeState)
	for _, key := range slices.Sorted(maps.Keys(s.chosen)) {
		var err error
		if pv := s.chosen[key]; pv != "" {
			err = pl.reserveVolume(ctx, pv, key)
		} else {
			err = pl.selectNode(ctx, key, nodeName)
		}
		if err != nil {
			return framework.AsStatus(fmt.Errorf("binding volumes: %w", err))
		}
	}
	if err := pl.waitBound(ctx, pod); err != nil {
		return framework.AsStatus(fmt.Errorf("binding volumes: %w", err))
	}
	return nil
}

// reserveVolume sets the volume's claimRef to the claim (key), as the
// scheduler's binder does; the persistent volume controller completes the
// binding. Conflicts are retried on a fresh read.
func (pl *VolumeBinding) reserveVolume(ctx context.Context, name, key string) error {
	ns, claimName := client.SplitKey(key)
	c, err := client.Get[*api.PersistentVolumeClaim](ctx, pl.client, ns, claimName)
	if err != nil {
		return err
	}
	return retryOnConflict(func() error {
		pv, err := client.Get[*api.PersistentVolume](ctx, pl.client, "", name)
		if err != nil {
			return err
		}
		if r := pv.Spec.ClaimRef; r != nil {
			if r.Namespace == ns && r.Name == claimName && r.UID == c.UID {
				return nil
			}
			return fmt.Errorf("volume %q was taken by claim %s/%s", name, r.Namespace, r.Name)
		}
		u := api.Clone(pv)
		u.Annotations = maps.Clone(u.Annotations)
		if u.Annotations == nil {
			u.Annotations = map[string]string{}
		}
		u.Annotations[api.AnnotationBoundByController] = "yes"
		u.Spec.ClaimRef = &api.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: claimName, UID: c.UID, ResourceVersion: c.ResourceVersion}
		_, err = pl.client.Update(ctx, u)
		return err
	})
}

// selectNode annotates the claim with the node its volume is to be made on.
func (pl *VolumeBinding) selectNode(ctx context.Context, key, node string) error {
	ns, name := client.SplitKey(key)
	return retryOnConflict(func() error {
		c, err := client.Get[*api.PersistentVolumeClaim](ctx, pl.client, ns, name)
		if err != nil {
			return err
		}
		if c.Annotations[api.AnnotationSelectedNode] == node {
			return nil
		}
		u := api.Clone(c)
		u.Annotations = maps.Clone(u.Annotations)
		if u.Annotations == nil {
			u.Annotations = map[string]string{}
		}
		u.Annotations[api.AnnotationSelectedNode] = node
		_, err = pl.client.Update(ctx, u)
		return err
	})
}

func retryOnConflict(f func() error) error {
	var err error
	for range 5 {
		if err = f(); !api.IsConflict(err) {
			return err
		}
	}
	return err
}

// errBindTimeout is what a wait past BindTimeout reports, in Kubernetes'
// words ("binding volumes: context deadline exceeded").
var errBindTimeout = errors.New("context deadline exceeded")

// waitBound waits until the informer shows every claim of pod bound.
func (pl *VolumeBinding) waitBound(ctx context.Context, pod *api.Pod) error {
	deadline := time.NewTimer(pl.BindTimeout)
	defer deadline.Stop()
	for {
		pl.mu.Lock()
		changed := pl.changed
		pl.mu.Unlock()
		if pl.allBound(pod) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return errBindTimeout
		}
	}
}

func (pl *VolumeBinding) allBound(pod *api.Pod) bool {
	for _, name := range api.ClaimsOf(pod) {
		o, ok := pl.claims.Get(pod.Namespace, name)
		if !ok {
			return false
		}
		if c := o.(*api.PersistentVolumeClaim); c.Spec.VolumeName == "" || c.Status.Phase != api.ClaimBound {
			return false
		}
	}
	return true
}
