package api

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

func testClaim() *PersistentVolumeClaim {
	c := &PersistentVolumeClaim{ObjectMeta: ObjectMeta{Name: "data", Namespace: "default"}}
	c.Spec.AccessModes = []string{ReadWriteOnce}
	c.Spec.StorageClassName = ptr(LocalPathStorageClass)
	c.Spec.Resources.Requests = ResourceList{ResourceStorage: resource.MustParse("1Gi")}
	SetDefaults(c)
	return c
}

func TestStorageUpdates(t *testing.T) {
	pv := &PersistentVolume{ObjectMeta: ObjectMeta{Name: "pv"}, Spec: PersistentVolumeSpec{
		Capacity: ResourceList{ResourceStorage: resource.MustParse("1Gi")}, AccessModes: []string{ReadWriteOnce},
		HostPath: &HostPathVolumeSource{Path: "/mnt/a"}}}
	SetDefaults(pv)
	sc := &StorageClass{ObjectMeta: ObjectMeta{Name: "fast"}, Provisioner: NoProvisioner}
	SetDefaults(sc)
	for _, tc := range []struct {
		name   string
		old    Object
		change func(Object)
		want   string // "" = allowed
	}{
		{"claim bound by the controller", testClaim(), func(o Object) { o.(*PersistentVolumeClaim).Spec.VolumeName = "pvc-1" }, ""},
		{"claim's status and labels", testClaim(), func(o Object) {
			c := o.(*PersistentVolumeClaim)
			c.Status.Phase, c.Labels = ClaimBound, map[string]string{"a": "b"}
		}, ""},
		{"same size, other spelling", testClaim(), func(o Object) {
			o.(*PersistentVolumeClaim).Spec.Resources.Requests[ResourceStorage] = resource.MustParse("1024Mi")
		}, ""},
		{"claim's class", testClaim(), func(o Object) { o.(*PersistentVolumeClaim).Spec.StorageClassName = ptr("other") },
			"spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"},
		{"claim resized", testClaim(), func(o Object) {
			o.(*PersistentVolumeClaim).Spec.Resources.Requests[ResourceStorage] = resource.MustParse("2Gi")
		}, "spec.resources.requests.storage: Forbidden: only dynamically provisioned pvc can be resized"},
		{"rebinding a bound claim", func() Object { c := testClaim(); c.Spec.VolumeName = "a"; return c }(),
			func(o Object) { o.(*PersistentVolumeClaim).Spec.VolumeName = "b" }, "spec: Forbidden: spec is immutable"},
		{"volume's capacity and claimRef", pv, func(o Object) {
			v := o.(*PersistentVolume)
			v.Spec.Capacity[ResourceStorage] = resource.MustParse("2Gi")
			v.Spec.ClaimRef = &ObjectReference{Namespace: "default", Name: "data"}
		}, ""},
		{"volume's path", pv, func(o Object) { o.(*PersistentVolume).Spec.HostPath.Path = "/mnt/b" },
			"spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation"},
		{"class's labels", sc, func(o Object) { o.GetObjectMeta().Labels = map[string]string{"a": "b"} }, ""},
		{"class's parameters", sc, func(o Object) { o.(*StorageClass).Parameters = map[string]string{"a": "b"} },
			"parameters: Forbidden: updates to parameters are forbidden."},
		{"class's binding mode", sc, func(o Object) { o.(*StorageClass).VolumeBindingMode = ptr(VolumeBindingWaitForFirstConsumer) },
			`volumeBindingMode: Invalid value: "Immediate": field is immutable`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := Clone(tc.old)
			tc.change(n)
			errs := ValidateUpdate(n, tc.old)
			switch {
			case tc.want == "" && len(errs) > 0:
				t.Fatalf("refused: %v", errs)
			case tc.want != "" && !strings.Contains(errs.Error(), tc.want):
				t.Fatalf("errors %v, want %q", errs, tc.want)
			}
		})
	}
}

func TestStorageDefaults(t *testing.T) {
	c := testClaim()
	if c.Status.Phase != ClaimPending || *c.Spec.VolumeMode != PersistentVolumeFilesystem {
		t.Errorf("claim defaults: phase %q, mode %q", c.Status.Phase, *c.Spec.VolumeMode)
	}
	pv := &PersistentVolume{}
	SetDefaults(pv)
	if pv.Spec.PersistentVolumeReclaimPolicy != ReclaimRetain || pv.Status.Phase != VolumePending {
		t.Errorf("volume defaults: %q %q", pv.Spec.PersistentVolumeReclaimPolicy, pv.Status.Phase)
	}
	sc := &StorageClass{}
	SetDefaults(sc)
	if *sc.ReclaimPolicy != ReclaimDelete || BindingMode(sc) != VolumeBindingImmediate {
		t.Errorf("class defaults: %q %q", *sc.ReclaimPolicy, BindingMode(sc))
	}
}

func TestAccessModesString(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{ReadWriteOncePod}, "RWOP"},
		{[]string{ReadWriteMany, ReadWriteOnce, ReadOnlyMany}, "RWO,ROX,RWX"},
	} {
		if got := AccessModesString(tc.in); got != tc.want {
			t.Errorf("AccessModesString(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestClaimClass(t *testing.T) {
	c := testClaim()
	if got := ClaimClass(c); got != LocalPathStorageClass {
		t.Errorf("ClaimClass = %q", got)
	}
	c.Annotations = map[string]string{AnnotationBetaStorageClass: "beta"}
	if got := ClaimClass(c); got != "beta" {
		t.Errorf("ClaimClass with the beta annotation = %q", got)
	}
	c.Annotations, c.Spec.StorageClassName = nil, nil
	if got := ClaimClass(c); got != "" {
		t.Errorf("ClaimClass of no class = %q", got)
	}
}
