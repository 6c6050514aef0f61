package apiserver

import (
	"context"
	"fmt"
	"slices"

	"skiff.dev/skiff/api"
)

// Storage admission, as Kubernetes' DefaultStorageClass and
// StorageObjectInUseProtection admission plugins:
//
//   - a new PersistentVolumeClaim that names no class (storageClassName
//     left out, no beta annotation) gets the default StorageClass's name
//     (the newest class annotated storageclass.kubernetes.io/is-default-class:
//     "true"); with no default class it stays without one, and the
//     persistent volume controller fills it in when a default appears;
//   - every new claim gets the finalizer kubernetes.io/pvc-protection and
//     every new volume kubernetes.io/pv-protection, so that a claim a pod
//     still uses and a volume still bound are not removed under it (the
//     protection controllers, controlplane/controllers/volumeprotection.go,
//     take the finalizers off when that is safe).
var storageClassKind = api.MustKindOf(&api.StorageClass{})

// admitStorage runs the admission above; obj is the registry's own copy,
// changed in place. Other kinds pass.
func (r *Registry) admitStorage(ctx context.Context, obj api.Object) error {
	switch o := obj.(type) {
	case *api.PersistentVolumeClaim:
		if _, beta := o.Annotations[api.AnnotationBetaStorageClass]; o.Spec.StorageClassName == nil && !beta {
			def, err := r.defaultStorageClass(ctx)
			if err != nil {
				return err
			}
			if def != nil {
				o.Spec.StorageClassName = &def.Name
			}
		}
		addFinalizer(&o.ObjectMeta, api.FinalizerPVCProtection)
	case *api.PersistentVolume:
		addFinalizer(&o.ObjectMeta, api.FinalizerPVProtection)
	}
	return nil
}

func addFinalizer(m *api.ObjectMeta, f string) {
	if !slices.Contains(m.Finalizers, f) {
		m.Finalizers = append(m.Finalizers, f)
	}
}

// defaultStorageClass is the default StorageClass, or nil.
func (r *Registry) defaultStorageClass(ctx context.Context) (*api.StorageClass, error) {
	items, _, err := r.store.List(ctx, storageClassKind, "")
	if err != nil {
		return nil, fmt.Errorf("list storage classes: %w", err)
	}
	classes := make([]*api.StorageClass, 0, len(items))
	for _, o := range items {
		classes = append(classes, o.(*api.StorageClass))
	}
	return api.DefaultClass(classes), nil
}

// ensureLocalPathClass creates the default StorageClass local-path (k3s's)
// when no StorageClass of that name exists: a cluster that removed it gets
// it back at the next start, as k3s re-applies its manifests.
func (r *Registry) ensureLocalPathClass(ctx context.Context) error {
	if _, err := r.Create(ctx, storageClassKind, api.LocalPathClass()); err != nil && !api.IsAlreadyExists(err) {
		return fmt.Errorf("create storage class %q: %w", api.LocalPathStorageClass, err)
	}
	return nil
}
