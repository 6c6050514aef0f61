package table

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff.dev/skiff/api"
)

// The storage kinds, as Kubernetes' printers (printPersistentVolume,
// printPersistentVolumeClaim, printStorageClass): a PV or PVC being
// deleted shows Terminating; a claim's capacity and access modes are its
// bound volume's, empty until it is bound.

func persistentVolumePrinter() Printer {
	spec, status := corev1.PersistentVolumeSpec{}.SwaggerDoc(), corev1.PersistentVolumeStatus{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			col("Capacity", spec["capacity"]),
			col("Access Modes", spec["accessModes"]),
			col("Reclaim Policy", spec["persistentVolumeReclaimPolicy"]),
			col("Status", status["phase"]),
			col("Claim", spec["claimRef"]),
			col("StorageClass", "StorageClass of the pv"),
			col("VolumeAttributesClass", "VolumeAttributesClass of the pv"),
			col("Reason", status["reason"]),
			ageColumn(),
			wideCol("VolumeMode", spec["volumeMode"]),
		},
		Cells: func(o api.Object, now time.Time) []any {
			pv := o.(*api.PersistentVolume)
			claim := ""
			if r := pv.Spec.ClaimRef; r != nil {
				claim = r.Namespace + "/" + r.Name
			}
			size := pv.Spec.Capacity[api.ResourceStorage]
			phase := pv.Status.Phase
			if pv.DeletionTimestamp != nil {
				phase = "Terminating"
			}
			return []any{pv.Name, size.String(), api.AccessModesString(pv.Spec.AccessModes), pv.Spec.PersistentVolumeReclaimPolicy,
				phase, claim, api.VolumeClass(pv), "<unset>", pv.Status.Reason, Age(now, pv.CreationTimestamp.Time), volumeMode(pv.Spec.VolumeMode)}
		},
	}
}

func persistentVolumeClaimPrinter() Printer {
	spec, status := corev1.PersistentVolumeClaimSpec{}.SwaggerDoc(), corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			col("Status", status["phase"]),
			col("Volume", spec["volumeName"]),
			col("Capacity", status["capacity"]),
			col("Access Modes", status["accessModes"]),
			col("StorageClass", "StorageClass of the pvc"),
			col("VolumeAttributesClass", "VolumeAttributesClass of the pvc"),
			ageColumn(),
			wideCol("VolumeMode", spec["volumeMode"]),
		},
		Cells: func(o api.Object, now time.Time) []any {
			c := o.(*api.PersistentVolumeClaim)
			phase := c.Status.Phase
			if c.DeletionTimestamp != nil {
				phase = "Terminating"
			}
			capacity, modes := "", ""
			if c.Spec.VolumeName != "" {
				modes = api.AccessModesString(c.Status.AccessModes)
				q := c.Status.Capacity[api.ResourceStorage]
				capacity = q.String()
			}
			return []any{c.Name, phase, c.Spec.VolumeName, capacity, modes, api.ClaimClass(c), "<unset>",
				Age(now, c.CreationTimestamp.Time), volumeMode(c.Spec.VolumeMode)}
		},
	}
}

func volumeMode(m *string) string {
	if m == nil {
		return "<unset>"
	}
	return *m
}

func storageClassPrinter() Printer {
	doc := storagev1.StorageClass{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			col("Provisioner", doc["provisioner"]),
			col("ReclaimPolicy", doc["reclaimPolicy"]),
			col("VolumeBindingMode", doc["volumeBindingMode"]),
			col("AllowVolumeExpansion", doc["allowVolumeExpansion"]),
			ageColumn(),
		},
		Cells: func(o api.Object, now time.Time) []any {
			sc := o.(*api.StorageClass)
			name := sc.Name
			if api.IsDefaultClass(sc) {
				name += " (default)"
			}
			policy := api.ReclaimDelete
			if sc.ReclaimPolicy != nil {
				policy = *sc.ReclaimPolicy
			}
			expansion := false
			if sc.AllowVolumeExpansion != nil {
				expansion = *sc.AllowVolumeExpansion
			}
			return []any{name, sc.Provisioner, policy, api.BindingMode(sc), expansion, Age(now, sc.CreationTimestamp.Time)}
		},
	}
}
