package controllers

import (
	"slices"

	"k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
)

// bestVolume picks the volume for an unbound claim, as Kubernetes'
// findBestMatchForClaim: a volume reserved for the claim (its claimRef
// names it) first; else, unless binding waits for the first consumer, the
// smallest volume of the claim's class that is free and fits. With
// WaitForFirstConsumer the scheduler reserves the volume (it knows the
// pod's node), so only reserved volumes count. nil when none.
func bestVolume(c *api.PersistentVolumeClaim, volumes []*api.PersistentVolume, delayed bool) *api.PersistentVolume {
	var best *api.PersistentVolume
	for _, pv := range volumes {
		if pv.DeletionTimestamp != nil || fits(pv, c) != "" {
			continue
		}
		if r := pv.Spec.ClaimRef; r != nil {
			if claimRefIs(r, c) {
				return pv
			}
			continue
		}
		if delayed || pv.Status.Phase != api.VolumeAvailable {
			continue
		}
		if best == nil {
			best = pv
			continue
		}
		a, b := size(pv), size(best)
		if d := a.Cmp(b); d < 0 || d == 0 && pv.Name < best.Name {
			best = pv
		}
	}
	return best
}

func size(pv *api.PersistentVolume) api.Quantity { return pv.Spec.Capacity[api.ResourceStorage] }

// fits says why pv cannot hold claim c ("" when it can), in Kubernetes'
// words where it has them (checkVolumeSatisfyClaim).
func fits(pv *api.PersistentVolume, c *api.PersistentVolumeClaim) string {
	want := c.Spec.Resources.Requests[api.ResourceStorage]
	if have := size(pv); have.Cmp(want) < 0 {
		return "requested PV is too small"
	}
	if api.VolumeClass(pv) != api.ClaimClass(c) {
		return "storageClassName does not match"
	}
	for _, m := range c.Spec.AccessModes {
		if !slices.Contains(pv.Spec.AccessModes, m) {
			return "incompatible accessMode"
		}
	}
	if modeOf(pv.Spec.VolumeMode) != modeOf(c.Spec.VolumeMode) {
		return "incompatible volumeMode"
	}
	if c.Spec.Selector != nil {
		sel, err := c.Spec.Selector.AsSelector()
		if err != nil || !sel.Matches(labels.Set(pv.Labels)) {
			return "volume labels do not match the claim's selector"
		}
	}
	return ""
}

func modeOf(m *string) string {
	if m == nil {
		return api.PersistentVolumeFilesystem
	}
	return *m
}

// quantitiesEqual compares resource lists by value ("1Gi" equals "1024Mi").
func quantitiesEqual(a, b api.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, q := range a {
		if r, ok := b[k]; !ok || q.Cmp(r) != 0 {
			return false
		}
	}
	return true
}
