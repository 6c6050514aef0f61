package controllers

import (
	"log/slog"

	"skiff.dev/skiff/client"
)

// addStorage builds the storage controllers over shared caches of claims
// and volumes (and the pods cache the others share):
//
//   - pvc-protection and pv-protection (volumeprotection.go): a claim or
//     volume being deleted, or a pod using a claim changed.
//
// It returns the claims' cache (the StatefulSet controller and the
// garbage collector read it too).
func (m *Manager) addStorage(c client.Interface, pods *client.Informer, newLoop func(string, client.Reconciler, func() []string) *client.Loop, _ func(string) EventRecorder, log *slog.Logger) *client.Informer {
	claims := m.informer(c, claimKind(), log)
	volumes := m.informer(c, volumeKind(), log)

	pvcp := NewPVCProtectionController(c, claims, pods, log)
	pvcpLoop := newLoop(pvcProtectionControllerName, pvcp, claims.Keys)
	claims.AddHandler(pvcpLoop.Handler())
	pods.AddHandler(pvcp.PodHandler(pvcpLoop.Enqueue))

	pvp := NewPVProtectionController(c, volumes, log)
	pvpLoop := newLoop(pvProtectionControllerName, pvp, volumes.Keys)
	volumes.AddHandler(pvpLoop.Handler())
	return claims
}
