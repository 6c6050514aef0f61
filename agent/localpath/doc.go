// Package localpath is skiff's built-in dynamic volume provisioner,
// rancher.io/local-path, as k3s ships it (rancher/local-path-provisioner):
// a PersistentVolume is a directory of one node.
//
// Every agent runs one for its node. It acts on a claim when all of these
// hold, which is how an external provisioner learns that a volume is
// wanted from it:
//
//   - the claim is not bound and not being deleted;
//   - the persistent volume controller annotated it
//     volume.kubernetes.io/storage-provisioner: rancher.io/local-path (its
//     StorageClass names this provisioner);
//   - the scheduler annotated it volume.kubernetes.io/selected-node: THIS
//     NODE (the class binds WaitForFirstConsumer: the claim's first pod was
//     placed here).
//
// It then makes DATA-DIR/storage/pvc-UID_NAMESPACE_NAME (mode 0777, so any
// container user may write) and a PersistentVolume pvc-UID: the claim's
// size and access modes, the class's reclaim policy, a hostPath to the
// directory, node affinity kubernetes.io/hostname In [THIS NODE] and a
// claimRef to the claim; the persistent volume controller binds the two.
// Events on the claim, from "rancher.io/local-path_NODE": Provisioning,
// ProvisioningSucceeded, ProvisioningFailed (local-path volumes are
// ReadWriteOnce or ReadWriteOncePod only).
//
// When a volume it made is Released (its claim is gone) and its reclaim
// policy is Delete, it removes the directory, then the volume. A Retain
// volume keeps its directory and data until an administrator deletes it.
//
// # Invariants
//
//   - It only ever removes a directory directly inside its own storage
//     directory, and only of a volume annotated as its own with node
//     affinity to its node (api.IsLocalPathVolumeOf); the API server lets a
//     node create and delete no other volume (authz_storage.go).
//   - Acting twice is harmless: a volume that exists is not made again, a
//     directory that is gone is not an error.
package localpath
