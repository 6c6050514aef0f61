package controllers

import (
	"log/slog"

	"skiff.dev/skiff/client"
)

// addStorage builds the storage controllers over shared caches of claims
// and volumes (and the pods cache the others share):
//
//   - the persistent volume controller (persistentvolume.go), one loop
//     for claims and one for volumes: a claim, a volume or a class
//     changed;
//   - pvc-protection and pv-protection (volumeprotection.go): a claim or
//     volume being deleted, or a pod using a claim changed.
//
// It returns the claims' cache (the StatefulSet controller and the
// garbage collector read it too).
func (m *Manager) addStorage(c client.Interface, pods *client.Informer, newLoop func(string, client.Reconciler, func() []string) *client.Loop, events func(string) EventRecorder, log *slog.Logger) *client.Informer {
	claims := m.informer(c, claimKind(), log)
	volumes := m.informer(c, volumeKind(), log)
	classes := m.informer(c, storageClassKind(), log)

	pvc := NewPersistentVolumeController(c, claims, volumes, classes, events(persistentVolumeControllerName), log)
	claimLoop := newLoop(persistentVolumeControllerName+"-claims", client.ReconcilerFunc(pvc.ReconcileClaim), claims.Keys)
	volumeLoop := newLoop(persistentVolumeControllerName+"-volumes", client.ReconcilerFunc(pvc.ReconcileVolume), volumes.Keys)
	claims.AddHandler(claimLoop.Handler())
	claims.AddHandler(pvc.ClaimHandler(volumeLoop.Enqueue))
	volumes.AddHandler(volumeLoop.Handler())
	volumes.AddHandler(pvc.VolumeHandler(claimLoop.Enqueue))
	classes.AddHandler(pvc.ClassHandler(claimLoop.Enqueue))

	pvcp := NewPVCProtectionController(c, claims, pods, log)
	pvcpLoop := newLoop(pvcProtectionControllerName, pvcp, claims.Keys)
	claims.AddHandler(pvcpLoop.Handler())
	pods.AddHandler(pvcp.PodHandler(pvcpLoop.Enqueue))

	pvp := NewPVProtectionController(c, volumes, log)
	pvpLoop := newLoop(pvProtectionControllerName, pvp, volumes.Keys)
	volumes.AddHandler(pvpLoop.Handler())
	return claims
}
