package controllers

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
)

func protectedClaim(name string) *api.PersistentVolumeClaim {
	c := &api.PersistentVolumeClaim{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "ns", Finalizers: []string{api.FinalizerPVCProtection}}}
	c.Spec.AccessModes = []string{api.ReadWriteOnce}
	c.Spec.Resources.Requests = api.ResourceList{api.ResourceStorage: resource.MustParse("1Gi")}
	return c
}

func podUsing(name, claim, node, phase string) *api.Pod {
	p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "ns"}}
	p.Spec.NodeName = node
	p.Spec.Containers = []api.Container{{Name: "c", Image: "busybox"}}
	p.Spec.Volumes = []api.Volume{{Name: "data", PersistentVolumeClaim: &api.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
	p.Status.Phase = phase
	return p
}

func TestPVCProtection(t *testing.T) {
	ctx := context.Background()
	c := fake.New(protectedClaim("data"), protectedClaim("free"),
		podUsing("web", "data", "node-1", api.PodRunning),
		podUsing("pending", "free", "", api.PodPending), // not scheduled: does not hold the claim
		podUsing("done", "free", "node-1", api.PodSucceeded))
	claims, pods := fakeLister{c, claimKind()}, fakeLister{c, podKind()}
	ctl := NewPVCProtectionController(c, claims, pods, nil)
	for _, name := range []string{"data", "free"} {
		if err := c.Delete(ctx, claimKind(), "ns", name, api.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// A running pod holds its claim: nothing is written.
	c.ClearActions()
	if err := ctl.Reconcile(ctx, "ns/data"); err != nil {
		t.Fatal(err)
	}
	if w := writes(c); len(w) != 0 {
		t.Fatalf("claim in use: writes %v", w)
	}
	if o, err := c.Get(ctx, claimKind(), "ns", "data"); err != nil || o.GetObjectMeta().DeletionTimestamp == nil {
		t.Fatalf("claim in use should stay Terminating: %v %v", o, err)
	}

	// Unscheduled and finished pods do not: the finalizer goes, and so does the claim.
	if err := ctl.Reconcile(ctx, "ns/free"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, claimKind(), "ns", "free"); !api.IsNotFound(err) {
		t.Fatalf("free claim: %v, want it gone", err)
	}

	// Once the pod has finished, the claim goes too.
	pod, _ := c.Get(ctx, podKind(), "ns", "web")
	done := api.Clone(pod.(*api.Pod))
	done.Status.Phase = api.PodSucceeded
	if _, err := c.UpdateStatus(ctx, done); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Reconcile(ctx, "ns/data"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, claimKind(), "ns", "data"); !api.IsNotFound(err) {
		t.Fatalf("claim after its pod finished: %v, want it gone", err)
	}
}

// A pod the cache has not seen yet still holds the claim: the controller
// asks the API before letting go.
func TestPVCProtectionAsksTheAPI(t *testing.T) {
	ctx := context.Background()
	c := fake.New(protectedClaim("data"), podUsing("web", "data", "node-1", api.PodRunning))
	if err := c.Delete(ctx, claimKind(), "ns", "data", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ctl := NewPVCProtectionController(c, fakeLister{c, claimKind()}, newStaticLister(), nil)
	if err := ctl.Reconcile(ctx, "ns/data"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, claimKind(), "ns", "data"); err != nil {
		t.Fatalf("claim used by a pod the cache lacks was removed: %v", err)
	}
}

func TestPVProtection(t *testing.T) {
	ctx := context.Background()
	pv := func(name, phase string) *api.PersistentVolume {
		v := &api.PersistentVolume{ObjectMeta: api.ObjectMeta{Name: name, Finalizers: []string{api.FinalizerPVProtection}}}
		v.Spec.Capacity = api.ResourceList{api.ResourceStorage: resource.MustParse("1Gi")}
		v.Spec.AccessModes = []string{api.ReadWriteOnce}
		v.Spec.HostPath = &api.HostPathVolumeSource{Path: "/mnt/" + name}
		v.Status.Phase = phase
		return v
	}
	c := fake.New(pv("bound", api.VolumeBound), pv("released", api.VolumeReleased))
	ctl := NewPVProtectionController(c, fakeLister{c, volumeKind()}, nil)
	for _, name := range []string{"bound", "released"} {
		if err := c.Delete(ctx, volumeKind(), "", name, api.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := ctl.Reconcile(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Get(ctx, volumeKind(), "", "bound"); err != nil {
		t.Errorf("bound volume removed: %v", err)
	}
	if _, err := c.Get(ctx, volumeKind(), "", "released"); !api.IsNotFound(err) {
		t.Errorf("released volume: %v, want it gone", err)
	}
}
