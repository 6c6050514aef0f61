package apiserver

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
)

func localPV(name, node string) *api.PersistentVolume {
	pv := &api.PersistentVolume{ObjectMeta: api.ObjectMeta{Name: name, Annotations: map[string]string{api.AnnotationProvisionedBy: api.LocalPathProvisioner}}}
	pv.Spec.Capacity = api.ResourceList{api.ResourceStorage: resource.MustParse("1Gi")}
	pv.Spec.AccessModes = []string{api.ReadWriteOnce}
	pv.Spec.HostPath = &api.HostPathVolumeSource{Path: "/var/lib/skiff/storage/" + name}
	pv.Spec.NodeAffinity = &api.VolumeNodeAffinity{Required: &api.NodeSelector{NodeSelectorTerms: []api.NodeSelectorTerm{{
		MatchExpressions: []api.NodeSelectorRequirement{{Key: api.LabelHostname, Operator: "In", Values: []string{node}}}}}}}
	return pv
}

func claimOf(name string, class *string) *api.PersistentVolumeClaim {
	c := &api.PersistentVolumeClaim{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default"}}
	c.Spec.AccessModes = []string{api.ReadWriteOnce}
	c.Spec.StorageClassName = class
	c.Spec.Resources.Requests = api.ResourceList{api.ResourceStorage: resource.MustParse("1Gi")}
	return c
}

// The server starts with the default StorageClass local-path; claims that
// name no class get it, claims that name one (or "") keep theirs; every
// claim and volume is protected by its finalizer.
func TestStorageAdmission(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	o, err := e.reg.Get(ctx, storageClassKind, "", api.LocalPathStorageClass)
	if err != nil {
		t.Fatalf("default class: %v", err)
	}
	if sc := o.(*api.StorageClass); !api.IsDefaultClass(sc) || sc.Provisioner != api.LocalPathProvisioner || api.BindingMode(sc) != api.VolumeBindingWaitForFirstConsumer {
		t.Fatalf("local-path class: %+v", sc)
	}
	none, manual := "", "manual"
	for _, tc := range []struct {
		name  string
		class *string
		want  string
	}{
		{"defaulted", nil, api.LocalPathStorageClass},
		{"noclass", &none, ""},
		{"named", &manual, "manual"},
	} {
		out, err := e.reg.Create(ctx, claimKind, claimOf(tc.name, tc.class))
		if err != nil {
			t.Fatal(err)
		}
		c := out.(*api.PersistentVolumeClaim)
		if got := api.ClaimClass(c); got != tc.want || c.Spec.StorageClassName == nil {
			t.Errorf("%s: class %q (%v), want %q", tc.name, got, c.Spec.StorageClassName, tc.want)
		}
		if !slices.Equal(c.Finalizers, []string{api.FinalizerPVCProtection}) || c.Status.Phase != api.ClaimPending {
			t.Errorf("%s: finalizers %v, phase %q", tc.name, c.Finalizers, c.Status.Phase)
		}
	}
	// With no default class, a claim stays without one.
	if _, err := e.reg.Update(ctx, storageClassKind, withAnnotations(api.LocalPathClass(), nil)); err != nil {
		t.Fatal(err)
	}
	out, err := e.reg.Create(ctx, claimKind, claimOf("nodefault", nil))
	if err != nil {
		t.Fatal(err)
	}
	if c := out.(*api.PersistentVolumeClaim); c.Spec.StorageClassName != nil {
		t.Errorf("no default class: claim got %q", *c.Spec.StorageClassName)
	}
	out, err = e.reg.Create(ctx, persistentVolumeKind, localPV("pv1", "n1"))
	if err != nil {
		t.Fatal(err)
	}
	if pv := out.(*api.PersistentVolume); !slices.Equal(pv.Finalizers, []string{api.FinalizerPVProtection}) || pv.Status.Phase != api.VolumePending {
		t.Errorf("volume: finalizers %v, phase %q", pv.Finalizers, pv.Status.Phase)
	}
}

func withAnnotations(sc *api.StorageClass, a map[string]string) *api.StorageClass {
	sc.Annotations = a
	return sc
}

var claimKind = api.MustKindOf(&api.PersistentVolumeClaim{})

// A node reads claims and volumes, creates only its own provisioner's
// volumes and deletes only those.
func TestAuthorizeNodeStorage(t *testing.T) {
	e := newEnv(t)
	ctx := WithUser(context.Background(), nodeN1)
	for _, pv := range []*api.PersistentVolume{localPV("mine", "n1"), localPV("theirs", "n2")} {
		if _, err := e.reg.Create(context.Background(), persistentVolumeKind, pv); err != nil {
			t.Fatal(err)
		}
	}
	hand := localPV("hand", "n1")
	hand.Annotations = nil
	if _, err := e.reg.Create(context.Background(), persistentVolumeKind, hand); err != nil {
		t.Fatal(err)
	}
	noRel := "no relationship found between node 'n1' and this object"
	for _, tc := range []struct {
		name   string
		a      attributes
		allow  bool
		reason string
	}{
		{"node lists claims", res(nodeN1, "list", "", "persistentvolumeclaims", "", "", ""), true, ""},
		{"node watches volumes", res(nodeN1, "watch", "", "persistentvolumes", "", "", ""), true, ""},
		{"node gets a claim", res(nodeN1, "get", "", "persistentvolumeclaims", "", "x", "data"), true, ""},
		{"node cannot update a claim", res(nodeN1, "update", "", "persistentvolumeclaims", "", "x", "data"), false, `node "n1" may not update persistentvolumeclaims`},
		{"node cannot create a claim", res(nodeN1, "create", "", "persistentvolumeclaims", "", "x", ""), false, ""},
		{"node creates a volume", res(nodeN1, "create", "", "persistentvolumes", "", "", ""), true, ""},
		{"node deletes its provisioner's volume", res(nodeN1, "delete", "", "persistentvolumes", "", "", "mine"), true, ""},
		{"node cannot delete another node's volume", res(nodeN1, "delete", "", "persistentvolumes", "", "", "theirs"), false, noRel},
		{"node cannot delete a volume made by hand", res(nodeN1, "delete", "", "persistentvolumes", "", "", "hand"), false, noRel},
		{"node cannot update a volume", res(nodeN1, "update", "", "persistentvolumes", "", "", "mine"), false, `node "n1" may not update persistentvolumes`},
		{"node cannot write a volume's status", res(nodeN1, "update", "", "persistentvolumes", "status", "", "mine"), false, "cannot authorize storage subresources"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, reason, err := e.srv.authorize(context.Background(), tc.a)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.allow || reason != tc.reason {
				t.Fatalf("got %v %q, want %v %q", ok, reason, tc.allow, tc.reason)
			}
		})
	}
	// Creates: only volumes of its own local-path provisioner.
	if _, err := e.reg.Create(ctx, persistentVolumeKind, localPV("new", "n1")); err != nil {
		t.Fatalf("own provisioner's volume: %v", err)
	}
	for name, pv := range map[string]*api.PersistentVolume{"other-node": localPV("x1", "n2"), "by hand": hand} {
		pv = api.Clone(pv)
		pv.Name, pv.ResourceVersion, pv.UID = "x-"+pv.Name, "", ""
		if _, err := e.reg.Create(ctx, persistentVolumeKind, pv); api.StatusOf(err).Code != http.StatusForbidden {
			t.Errorf("%s: create = %v, want 403", name, err)
		}
	}
}
