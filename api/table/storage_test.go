package table

import (
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
)

func TestStoragePrinters(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	made := api.NewTime(now.Add(-2 * time.Minute))
	class := "local-path"
	claim := &api.PersistentVolumeClaim{ObjectMeta: api.ObjectMeta{Name: "data", CreationTimestamp: made}}
	claim.Spec.StorageClassName = &class
	claim.Spec.Resources.Requests = api.ResourceList{"storage": resource.MustParse("1Gi")}
	pending := api.Clone(claim)
	pending.Status.Phase = api.ClaimPending
	bound := api.Clone(claim)
	bound.Spec.VolumeName = "pvc-1"
	bound.Status = api.PersistentVolumeClaimStatus{Phase: api.ClaimBound, AccessModes: []string{api.ReadWriteOnce},
		Capacity: api.ResourceList{"storage": resource.MustParse("1Gi")}}
	pv := &api.PersistentVolume{ObjectMeta: api.ObjectMeta{Name: "pvc-1", CreationTimestamp: made}}
	pv.Spec = api.PersistentVolumeSpec{Capacity: api.ResourceList{"storage": resource.MustParse("1Gi")},
		AccessModes: []string{api.ReadWriteOnce}, PersistentVolumeReclaimPolicy: api.ReclaimDelete, StorageClassName: class,
		ClaimRef: &api.ObjectReference{Namespace: "default", Name: "data"}}
	pv.Status.Phase = api.VolumeBound
	deleting := api.Clone(pv)
	deleting.DeletionTimestamp = &made
	sc := &api.StorageClass{ObjectMeta: api.ObjectMeta{Name: "local-path", CreationTimestamp: made,
		Annotations: map[string]string{api.AnnotationDefaultStorageClass: "true"}}, Provisioner: api.LocalPathProvisioner}
	api.SetDefaults(sc)
	mode := api.VolumeBindingWaitForFirstConsumer
	sc.VolumeBindingMode = &mode

	for _, tc := range []struct {
		name    string
		obj     api.Object
		headers []string
		cells   []any
	}{
		{"pending claim", pending,
			[]string{"NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS MODES", "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "AGE"},
			[]any{"data", "Pending", "", "", "", "local-path", "<unset>", "2m", "<unset>"}},
		{"bound claim", bound, nil, []any{"data", "Bound", "pvc-1", "1Gi", "RWO", "local-path", "<unset>", "2m", "<unset>"}},
		{"volume", pv,
			[]string{"NAME", "CAPACITY", "ACCESS MODES", "RECLAIM POLICY", "STATUS", "CLAIM", "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "REASON", "AGE"},
			[]any{"pvc-1", "1Gi", "RWO", "Delete", "Bound", "default/data", "local-path", "<unset>", "", "2m", "<unset>"}},
		{"deleting volume", deleting, nil, []any{"pvc-1", "1Gi", "RWO", "Delete", "Terminating", "default/data", "local-path", "<unset>", "", "2m", "<unset>"}},
		{"default class", sc,
			[]string{"NAME", "PROVISIONER", "RECLAIMPOLICY", "VOLUMEBINDINGMODE", "ALLOWVOLUMEEXPANSION", "AGE"},
			[]any{"local-path (default)", "rancher.io/local-path", "Delete", "WaitForFirstConsumer", false, "2m"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := For(api.MustKindOf(tc.obj))
			if tc.headers != nil {
				if got := Headers(p.Columns, false); !reflect.DeepEqual(got, tc.headers) {
					t.Errorf("headers %q, want %q", got, tc.headers)
				}
			}
			if got := p.Cells(tc.obj, now); !reflect.DeepEqual(got, tc.cells) {
				t.Errorf("cells %#v, want %#v", got, tc.cells)
			}
		})
	}
}
