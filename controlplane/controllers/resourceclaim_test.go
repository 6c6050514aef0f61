package controllers

import (
	"context"
	"regexp"
	"slices"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
)

func claimTemplate() *api.ResourceClaimTemplate {
	return &api.ResourceClaimTemplate{
		ObjectMeta: api.ObjectMeta{Name: "single-gpu", Namespace: "gpu-test"},
		Spec: api.ResourceClaimTemplateSpec{
			ObjectMeta: api.ObjectMeta{Labels: map[string]string{"app": "demo"}},
			Spec: api.ResourceClaimSpec{Devices: api.DeviceClaim{Requests: []api.DeviceRequest{
				{Name: "gpu", Exactly: &api.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: "ExactCount", Count: 1}}}}},
		},
	}
}

func claimPod(phase string) *api.Pod {
	tmpl := "single-gpu"
	return &api.Pod{
		ObjectMeta: api.ObjectMeta{Name: "pod", Namespace: "gpu-test", UID: "uid-pod"},
		Spec: api.PodSpec{
			Containers:     []api.Container{{Name: "ctr", Image: "ubuntu", Resources: api.ResourceRequirements{Claims: []api.ContainerResourceClaim{{Name: "gpu"}}}}},
			ResourceClaims: []api.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}},
		},
		Status: api.PodStatus{Phase: phase},
	}
}

func allocatedClaim(name string, owner *api.Pod, reservedFor ...api.ResourceClaimConsumerReference) *api.ResourceClaim {
	c := &api.ResourceClaim{
		ObjectMeta: api.ObjectMeta{Name: name, Namespace: "gpu-test", UID: "uid-" + name, Finalizers: []string{api.ResourceClaimFinalizer}},
		Spec:       claimTemplate().Spec.Spec,
		Status: api.ResourceClaimStatus{ReservedFor: reservedFor, Allocation: &api.AllocationResult{Devices: api.DeviceAllocationResult{Results: []api.DeviceRequestAllocationResult{
			{Request: "gpu", Driver: "gpu.nvidia.com", Pool: "node-1", Device: "gpu-0"}}}}},
	}
	if owner != nil {
		ref := api.NewControllerRef(owner)
		ref.APIVersion, ref.Kind = "v1", "Pod"
		c.OwnerReferences = []api.OwnerReference{ref}
		c.Annotations = map[string]string{api.PodResourceClaimAnnotation: "gpu"}
	}
	return c
}

func newClaimController(c *fake.Client) *ResourceClaimController {
	return NewResourceClaimController(c, fakeLister{c, podKind()}, fakeLister{c, resourceClaimKind()}, fakeLister{c, resourceClaimTemplateKind()}, nil, nil)
}

// A pod naming a template gets its own claim: POD-ENTRY-XXXXX, owned by
// the pod, annotated, with the template's labels and spec; the pod's
// status names it; a second reconcile writes nothing.
func TestResourceClaimControllerMakesTemplateClaim(t *testing.T) {
	c := fake.New(claimTemplate(), claimPod(api.PodPending))
	rc := newClaimController(c)
	ctx := context.Background()
	if err := rc.Reconcile(ctx, "pod/gpu-test/pod"); err != nil {
		t.Fatal(err)
	}
	claims := list[*api.ResourceClaim](t, c, "gpu-test")
	if len(claims) != 1 {
		t.Fatalf("claims %d, want 1", len(claims))
	}
	cl := claims[0]
	if !regexp.MustCompile(`^pod-gpu-[a-z0-9]{5}$`).MatchString(cl.Name) {
		t.Errorf("name %q, want pod-gpu-XXXXX", cl.Name)
	}
	if ref := api.ControllerOf(cl); ref == nil || ref.UID != "uid-pod" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("owner %+v, want the pod as controller blocking deletion", ref)
	}
	if cl.Annotations[api.PodResourceClaimAnnotation] != "gpu" || cl.Labels["app"] != "demo" {
		t.Errorf("annotations %v labels %v", cl.Annotations, cl.Labels)
	}
	if cl.Spec.Devices.Requests[0].Exactly.DeviceClassName != "gpu.nvidia.com" {
		t.Errorf("spec %+v", cl.Spec)
	}
	p := get[*api.Pod](t, c, "gpu-test", "pod")
	if len(p.Status.ResourceClaimStatuses) != 1 || *p.Status.ResourceClaimStatuses[0].ResourceClaimName != cl.Name {
		t.Errorf("pod status %+v, want the claim %s", p.Status.ResourceClaimStatuses, cl.Name)
	}
	writes(c)
	if err := rc.Reconcile(ctx, "pod/gpu-test/pod"); err != nil {
		t.Fatal(err)
	}
	if got := writes(c); len(got) > 0 {
		t.Errorf("second reconcile wrote %v", got)
	}
}

// A missing template: an event, a retry, no claim.
func TestResourceClaimControllerMissingTemplate(t *testing.T) {
	c := fake.New(claimPod(api.PodPending))
	ev := &events{}
	rc := NewResourceClaimController(c, fakeLister{c, podKind()}, fakeLister{c, resourceClaimKind()}, fakeLister{c, resourceClaimTemplateKind()}, ev, nil)
	if err := rc.Reconcile(context.Background(), "pod/gpu-test/pod"); err == nil {
		t.Fatal("no error (retry) for a missing template")
	}
	if got := ev.take(); len(got) != 1 || !regexp.MustCompile(`FailedResourceClaimCreation .*single-gpu`).MatchString(got[0]) {
		t.Errorf("events %v", got)
	}
	if n := len(list[*api.ResourceClaim](t, c, "gpu-test")); n != 0 {
		t.Errorf("%d claims made", n)
	}
}

// Claim release, one reconcile at a time as the loop would run them.
func TestResourceClaimControllerRelease(t *testing.T) {
	running, done := claimPod(api.PodRunning), claimPod(api.PodSucceeded)
	ref := api.ResourceClaimConsumerReference{Resource: "pods", Name: "pod", UID: "uid-pod"}
	cases := []struct {
		name   string
		objs   []api.Object
		writes []string
		check  func(t *testing.T, c *fake.Client)
	}{
		{"running consumer kept", []api.Object{running, allocatedClaim("c", nil, ref)}, nil, nil},
		{"done consumer removed and claim deallocated", []api.Object{done, allocatedClaim("c", nil, ref)},
			[]string{"update ResourceClaim gpu-test/c/status"}, func(t *testing.T, c *fake.Client) {
				cl := get[*api.ResourceClaim](t, c, "gpu-test", "c")
				if len(cl.Status.ReservedFor) != 0 || cl.Status.Allocation != nil {
					t.Errorf("status %+v, want unreserved and deallocated", cl.Status)
				}
			}},
		{"gone consumer removed", []api.Object{allocatedClaim("c", nil, ref)}, []string{"update ResourceClaim gpu-test/c/status"}, nil},
		{"unallocated loses the finalizer", []api.Object{func() *api.ResourceClaim {
			c := allocatedClaim("c", nil)
			c.Status.Allocation = nil
			return c
		}()}, []string{"update ResourceClaim gpu-test/c"}, func(t *testing.T, c *fake.Client) {
			if cl := get[*api.ResourceClaim](t, c, "gpu-test", "c"); slices.Contains(cl.Finalizers, api.ResourceClaimFinalizer) {
				t.Errorf("finalizers %v", cl.Finalizers)
			}
		}},
		{"template claim of a done pod deleted", []api.Object{done, func() *api.ResourceClaim {
			c := allocatedClaim("pod-gpu-abcde", done)
			c.Status.Allocation, c.Finalizers = nil, nil
			return c
		}()}, []string{"delete ResourceClaim gpu-test/pod-gpu-abcde"}, nil},
		{"template claim of a running pod kept", []api.Object{running, func() *api.ResourceClaim {
			c := allocatedClaim("pod-gpu-abcde", running)
			c.Status.Allocation, c.Finalizers = nil, nil
			return c
		}()}, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.New(tc.objs...)
			rc := newClaimController(c)
			key := "claim/gpu-test/c"
			for _, o := range tc.objs {
				if cl, ok := o.(*api.ResourceClaim); ok {
					key = "claim/gpu-test/" + cl.Name
				}
			}
			if err := rc.Reconcile(context.Background(), key); err != nil {
				t.Fatal(err)
			}
			if got := writes(c); !slices.Equal(got, tc.writes) {
				t.Errorf("writes %v, want %v", got, tc.writes)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}
