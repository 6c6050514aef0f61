package controllers

import (
	"context"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
)

func pvOf(name, class, size string, policy string) *api.PersistentVolume {
	pv := &api.PersistentVolume{ObjectMeta: api.ObjectMeta{Name: name, Finalizers: []string{api.FinalizerPVProtection}}}
	pv.Spec = api.PersistentVolumeSpec{Capacity: api.ResourceList{api.ResourceStorage: resource.MustParse(size)},
		AccessModes: []string{api.ReadWriteOnce}, StorageClassName: class, PersistentVolumeReclaimPolicy: policy,
		HostPath: &api.HostPathVolumeSource{Path: "/mnt/" + name}}
	pv.Status.Phase = api.VolumeAvailable
	return pv
}

func claimOf(name, class, size string) *api.PersistentVolumeClaim {
	c := protectedClaim(name)
	c.Spec.StorageClassName = &class
	c.Spec.Resources.Requests[api.ResourceStorage] = resource.MustParse(size)
	return c
}

func classOf(name, provisioner, mode string, isDefault bool) *api.StorageClass {
	sc := &api.StorageClass{ObjectMeta: api.ObjectMeta{Name: name}, Provisioner: provisioner, VolumeBindingMode: &mode}
	if isDefault {
		sc.Annotations = map[string]string{api.AnnotationDefaultStorageClass: "true"}
	}
	return sc
}

// pvFixture is the controller over live listers of a fake client.
type pvFixture struct {
	t   *testing.T
	c   *fake.Client
	ctl *PersistentVolumeController
	ev  *events
}

func newPVFixture(t *testing.T, objs ...api.Object) *pvFixture {
	c := fake.New(objs...)
	ev := &events{}
	ctl := NewPersistentVolumeController(c, fakeLister{c, claimKind()}, fakeLister{c, volumeKind()}, fakeLister{c, storageClassKind()}, ev, nil)
	return &pvFixture{t: t, c: c, ctl: ctl, ev: ev}
}

// settle runs both loops over every claim and volume until a round writes
// nothing (as the informers would keep enqueueing them).
func (f *pvFixture) settle() {
	f.t.Helper()
	ctx := context.Background()
	for range 10 {
		f.c.ClearActions()
		claims, _, _ := f.c.List(ctx, claimKind(), "", api.ListOptions{})
		for _, o := range claims {
			if err := f.ctl.ReconcileClaim(ctx, api.KeyOf(o)); err != nil {
				f.t.Fatal(err)
			}
		}
		vols, _, _ := f.c.List(ctx, volumeKind(), "", api.ListOptions{})
		for _, o := range vols {
			if err := f.ctl.ReconcileVolume(ctx, o.GetObjectMeta().Name); err != nil {
				f.t.Fatal(err)
			}
		}
		if len(writes(f.c)) == 0 {
			return
		}
	}
	f.t.Fatal("the controller never settled")
}

func (f *pvFixture) claim(name string) *api.PersistentVolumeClaim {
	o, err := f.c.Get(context.Background(), claimKind(), "ns", name)
	if err != nil {
		f.t.Fatal(err)
	}
	return o.(*api.PersistentVolumeClaim)
}

func (f *pvFixture) volume(name string) *api.PersistentVolume {
	o, err := f.c.Get(context.Background(), volumeKind(), "", name)
	if err != nil {
		f.t.Fatal(err)
	}
	return o.(*api.PersistentVolume)
}

// bound checks both halves of a binding.
func (f *pvFixture) bound(claim, volume string) {
	f.t.Helper()
	c, pv := f.claim(claim), f.volume(volume)
	if c.Spec.VolumeName != volume || c.Status.Phase != api.ClaimBound || c.Annotations[api.AnnotationBindCompleted] != "yes" {
		f.t.Errorf("claim %s: volumeName %q, phase %q, annotations %v", claim, c.Spec.VolumeName, c.Status.Phase, c.Annotations)
	}
	if q := c.Status.Capacity[api.ResourceStorage]; q.Cmp(pv.Spec.Capacity[api.ResourceStorage]) != 0 || !slices.Equal(c.Status.AccessModes, pv.Spec.AccessModes) {
		f.t.Errorf("claim %s status: capacity %v, modes %v", claim, c.Status.Capacity, c.Status.AccessModes)
	}
	if r := pv.Spec.ClaimRef; r == nil || r.Name != claim || r.UID != c.UID || pv.Status.Phase != api.VolumeBound {
		f.t.Errorf("volume %s: claimRef %+v, phase %q", volume, r, pv.Status.Phase)
	}
}

func (f *pvFixture) wantEvents(want ...string) {
	f.t.Helper()
	got := f.ev.take()
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, w) }) {
			f.t.Errorf("events %q lack %q", got, w)
		}
	}
}

func TestPersistentVolumeBindsTheSmallestFit(t *testing.T) {
	f := newPVFixture(t, classOf("manual", api.NoProvisioner, api.VolumeBindingImmediate, false),
		pvOf("big", "manual", "10Gi", api.ReclaimRetain), pvOf("small", "manual", "5Gi", api.ReclaimRetain),
		pvOf("tiny", "manual", "1Gi", api.ReclaimRetain), pvOf("other-class", "fast", "3Gi", api.ReclaimRetain),
		claimOf("data", "manual", "3Gi"))
	f.settle()
	f.bound("data", "small")
	if pv := f.volume("big"); pv.Spec.ClaimRef != nil || pv.Status.Phase != api.VolumeAvailable {
		t.Errorf("big: %+v %q", pv.Spec.ClaimRef, pv.Status.Phase)
	}
	if pv := f.volume("small"); pv.Annotations[api.AnnotationBoundByController] != "yes" {
		t.Errorf("small was bound by the controller: annotations %v", pv.Annotations)
	}
	if c := f.claim("data"); c.Annotations[api.AnnotationBoundByController] != "yes" {
		t.Errorf("claim annotations %v", c.Annotations)
	}
}

func TestPersistentVolumeWaitsForFirstConsumer(t *testing.T) {
	wffc := classOf("local-storage", api.NoProvisioner, api.VolumeBindingWaitForFirstConsumer, false)
	f := newPVFixture(t, wffc, pvOf("pv1", "local-storage", "5Gi", api.ReclaimRetain), claimOf("data", "local-storage", "1Gi"))
	f.settle()
	if c := f.claim("data"); c.Spec.VolumeName != "" || c.Status.Phase != api.ClaimPending {
		t.Fatalf("WaitForFirstConsumer claim bound before any pod: %q %q", c.Spec.VolumeName, c.Status.Phase)
	}
	f.wantEvents("Normal WaitForFirstConsumer waiting for first consumer to be created before binding")

	// The scheduler reserves the volume for the claim (its node fits): bound.
	pv := f.volume("pv1")
	pv.Spec.ClaimRef = &api.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "ns", Name: "data", UID: f.claim("data").UID}
	pv.Annotations = map[string]string{api.AnnotationBoundByController: "yes"}
	if _, err := f.c.Update(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	f.settle()
	f.bound("data", "pv1")
}

func TestPersistentVolumeAsksTheProvisioner(t *testing.T) {
	f := newPVFixture(t, api.LocalPathClass(), claimOf("data", api.LocalPathStorageClass, "1Gi"))
	c := f.claim("data")
	c.Annotations = map[string]string{api.AnnotationSelectedNode: "node-1"}
	if _, err := f.c.Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	f.settle()
	c = f.claim("data")
	if c.Annotations[api.AnnotationStorageProvisioner] != api.LocalPathProvisioner || c.Annotations[api.AnnotationBetaStorageProvisioner] != api.LocalPathProvisioner {
		t.Errorf("claim annotations %v", c.Annotations)
	}
	f.wantEvents("Normal ExternalProvisioning Waiting for a volume to be created either by the external provisioner 'rancher.io/local-path' or manually by the system administrator.")

	// The provisioner makes a volume whose claimRef is the claim: bound.
	pv := pvOf("pvc-"+c.UID, api.LocalPathStorageClass, "1Gi", api.ReclaimDelete)
	pv.Status = api.PersistentVolumeStatus{}
	pv.Annotations = map[string]string{api.AnnotationProvisionedBy: api.LocalPathProvisioner}
	pv.Spec.ClaimRef = &api.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "ns", Name: "data", UID: c.UID}
	if _, err := f.c.Create(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	f.settle()
	f.bound("data", pv.Name)

	// The claim goes: the volume is Released, for its provisioner to delete.
	if _, err := f.c.Update(context.Background(), withoutFinalizers(f.claim("data"))); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Delete(context.Background(), claimKind(), "ns", "data", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.settle()
	if v := f.volume(pv.Name); v.Status.Phase != api.VolumeReleased {
		t.Errorf("provisioned volume after its claim went: %q, want Released", v.Status.Phase)
	}
}

func withoutFinalizers(c *api.PersistentVolumeClaim) *api.PersistentVolumeClaim {
	c.Finalizers = nil
	return c
}

func TestPersistentVolumeCannotBind(t *testing.T) {
	none := ""
	noClass := claimOf("noclass", "", "1Gi")
	noClass.Spec.StorageClassName = &none
	f := newPVFixture(t, classOf("static", api.NoProvisioner, api.VolumeBindingImmediate, false),
		noClass, claimOf("static", "static", "1Gi"), claimOf("missing", "gold", "1Gi"))
	f.settle()
	f.wantEvents(
		"Warning FailedBinding no persistent volumes available for this claim and no storage class is set",
		"Warning ProvisioningFailed no volume plugin matched name: kubernetes.io/no-provisioner",
		`Warning ProvisioningFailed storageclass.storage.k8s.io "gold" not found`)
	for _, name := range []string{"noclass", "static", "missing"} {
		if c := f.claim(name); c.Status.Phase != api.ClaimPending || c.Spec.VolumeName != "" {
			t.Errorf("%s: %q %q", name, c.Status.Phase, c.Spec.VolumeName)
		}
	}
}

// A claim that names its volume binds to it when it fits and says why not
// when it does not.
func TestPersistentVolumePreBoundClaim(t *testing.T) {
	fitting, small := claimOf("fitting", "manual", "1Gi"), claimOf("small", "manual", "8Gi")
	fitting.Spec.VolumeName, small.Spec.VolumeName = "pv1", "pv2"
	f := newPVFixture(t, pvOf("pv1", "manual", "2Gi", api.ReclaimRetain), pvOf("pv2", "manual", "2Gi", api.ReclaimRetain), fitting, small)
	f.settle()
	f.bound("fitting", "pv1")
	if c := f.claim("fitting"); c.Annotations[api.AnnotationBoundByController] != "" {
		t.Errorf("a binding the user asked for is not the controller's: %v", c.Annotations)
	}
	f.wantEvents(`Warning FailedBinding Cannot bind to requested volume "pv2": requested PV is too small`)
	if pv := f.volume("pv2"); pv.Spec.ClaimRef != nil {
		t.Errorf("pv2 bound to a claim too big for it: %+v", pv.Spec.ClaimRef)
	}
}

func TestPersistentVolumeReclaim(t *testing.T) {
	f := newPVFixture(t, classOf("manual", api.NoProvisioner, api.VolumeBindingImmediate, false),
		pvOf("keep", "manual", "1Gi", api.ReclaimRetain), claimOf("a", "manual", "1Gi"))
	f.settle()
	f.bound("a", "keep")
	hand := pvOf("hand", "manual", "1Gi", api.ReclaimDelete)
	if _, err := f.c.Create(context.Background(), hand); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Create(context.Background(), claimOf("b", "manual", "1Gi")); err != nil {
		t.Fatal(err)
	}
	f.settle()
	f.bound("b", "hand")
	for _, name := range []string{"a", "b"} {
		if _, err := f.c.Update(context.Background(), withoutFinalizers(f.claim(name))); err != nil {
			t.Fatal(err)
		}
		if err := f.c.Delete(context.Background(), claimKind(), "ns", name, api.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.settle()
	if pv := f.volume("keep"); pv.Status.Phase != api.VolumeReleased || pv.Spec.ClaimRef == nil {
		t.Errorf("retained volume: %q %+v", pv.Status.Phase, pv.Spec.ClaimRef)
	}
	if pv := f.volume("hand"); pv.Status.Phase != api.VolumeFailed || !strings.Contains(pv.Status.Message, "no deletable volume plugin matched") {
		t.Errorf("hand-made volume with Delete: %q %q", pv.Status.Phase, pv.Status.Message)
	}
	f.wantEvents(`Warning VolumeFailedDelete error getting deleter volume plugin for volume "hand"`)
	// A new claim does not get a Released volume.
	if _, err := f.c.Create(context.Background(), claimOf("c", "manual", "1Gi")); err != nil {
		t.Fatal(err)
	}
	f.settle()
	if c := f.claim("c"); c.Spec.VolumeName != "" {
		t.Errorf("new claim bound to a released volume %q", c.Spec.VolumeName)
	}
}

func TestPersistentVolumeLostAndRetroactiveDefault(t *testing.T) {
	f := newPVFixture(t, classOf("manual", api.NoProvisioner, api.VolumeBindingImmediate, false),
		pvOf("pv1", "manual", "1Gi", api.ReclaimRetain), claimOf("data", "manual", "1Gi"))
	f.settle()
	f.bound("data", "pv1")
	pv := f.volume("pv1")
	pv.Finalizers = nil
	if _, err := f.c.Update(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Delete(context.Background(), volumeKind(), "", "pv1", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.settle()
	if c := f.claim("data"); c.Status.Phase != api.ClaimLost {
		t.Errorf("claim whose volume went: %q, want Lost", c.Status.Phase)
	}
	f.wantEvents("Warning ClaimLost Bound claim has lost its PersistentVolume. Data on the volume is lost!")

	// A claim made while no class was default gets the default once one is.
	orphan := claimOf("orphan", "", "1Gi")
	orphan.Spec.StorageClassName = nil
	if _, err := f.c.Create(context.Background(), orphan); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Create(context.Background(), api.LocalPathClass()); err != nil {
		t.Fatal(err)
	}
	f.settle()
	if c := f.claim("orphan"); c.Spec.StorageClassName == nil || *c.Spec.StorageClassName != api.LocalPathStorageClass {
		t.Errorf("retroactive default: %v", c.Spec.StorageClassName)
	}
}
