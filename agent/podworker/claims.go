package podworker

import (
	"context"
	"fmt"
	"os"

	"skiff.dev/skiff/api"
)

// claimPath resolves a pod's persistentVolumeClaim volume to the directory
// of its bound PersistentVolume on this node, as the kubelet's volume
// manager does before it mounts: the claim (in the pod's namespace) must
// exist, not be being deleted, and be bound; the volume is a hostPath
// (created first for DirectoryOrCreate, checked for the other types) or a
// local directory, which must exist. A claim not yet bound is an error
// the worker retries: the persistent volume controller or the node's
// provisioner is on its way.
func (w *Worker) claimPath(ctx context.Context, pod *api.Pod, src *api.PersistentVolumeClaimVolumeSource) (string, error) {
	key := api.Key(pod.Namespace, src.ClaimName)
	o, err := w.cfg.Client.Get(ctx, api.MustKindOf(&api.PersistentVolumeClaim{}), pod.Namespace, src.ClaimName)
	if err != nil {
		return "", fmt.Errorf("error processing PVC %s: %w", key, err)
	}
	claim := o.(*api.PersistentVolumeClaim)
	switch {
	case claim.DeletionTimestamp != nil:
		return "", fmt.Errorf("error processing PVC %s: PVC is being deleted", key)
	case claim.Spec.VolumeName == "" || claim.Status.Phase != api.ClaimBound:
		return "", fmt.Errorf("error processing PVC %s: PVC is not bound", key)
	}
	o, err = w.cfg.Client.Get(ctx, api.MustKindOf(&api.PersistentVolume{}), "", claim.Spec.VolumeName)
	if err != nil {
		return "", fmt.Errorf("error processing PVC %s: volume %s: %w", key, claim.Spec.VolumeName, err)
	}
	pv := o.(*api.PersistentVolume)
	if r := pv.Spec.ClaimRef; r == nil || r.Namespace != claim.Namespace || r.Name != claim.Name || (r.UID != "" && r.UID != claim.UID) {
		return "", fmt.Errorf("error processing PVC %s: volume %s is bound to another claim", key, pv.Name)
	}
	switch {
	case pv.Spec.HostPath != nil:
		p, err := w.prepareHostPath(pv.Spec.HostPath)
		if err != nil {
			return "", fmt.Errorf("volume %s: %w", pv.Name, err)
		}
		return p, nil
	case pv.Spec.Local != nil:
		if fi, err := os.Stat(pv.Spec.Local.Path); err != nil || !fi.IsDir() {
			return "", fmt.Errorf("volume %s: local path %q does not exist on node %s", pv.Name, pv.Spec.Local.Path, w.cfg.NodeName)
		}
		return pv.Spec.Local.Path, nil
	}
	return "", fmt.Errorf("volume %s has no source skiff can mount", pv.Name)
}
