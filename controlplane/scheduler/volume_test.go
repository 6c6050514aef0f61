package scheduler

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
)

func boundClaimOn(name, volume string) *api.PersistentVolumeClaim {
	c := &api.PersistentVolumeClaim{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "gpu-demo"}}
	c.Spec.AccessModes = []string{api.ReadWriteOnce}
	c.Spec.Resources.Requests = api.ResourceList{api.ResourceStorage: resource.MustParse("1Gi")}
	none := ""
	c.Spec.StorageClassName = &none
	c.Spec.VolumeName = volume
	if volume != "" {
		c.Status.Phase = api.ClaimBound
	}
	return c
}

func localVolumeOn(name, node string) *api.PersistentVolume {
	pv := &api.PersistentVolume{ObjectMeta: api.ObjectMeta{Name: name}}
	pv.Spec.Capacity = api.ResourceList{api.ResourceStorage: resource.MustParse("1Gi")}
	pv.Spec.AccessModes = []string{api.ReadWriteOnce}
	pv.Spec.Local = &api.LocalVolumeSource{Path: "/mnt/disk"}
	pv.Spec.NodeAffinity = &api.VolumeNodeAffinity{Required: &api.NodeSelector{NodeSelectorTerms: []api.NodeSelectorTerm{{
		MatchExpressions: []api.NodeSelectorRequirement{{Key: api.LabelHostname, Operator: "In", Values: []string{node}}}}}}}
	pv.Status.Phase = api.VolumeBound
	return pv
}

func withClaim(claim string) func(*api.Pod) {
	return func(p *api.Pod) {
		p.Spec.Volumes = []api.Volume{{Name: "data", PersistentVolumeClaim: &api.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
	}
}

// A pod on a claim bound to a node's local volume goes to that node; a
// claim nobody binds and a missing claim are Kubernetes' FailedScheduling
// messages.
func TestVolumeBindingScheduling(t *testing.T) {
	hostname := func(n string) func(*api.Node) { return labels(api.LabelHostname, n) }
	f := newDRAFixture(t, gpuNode("lab-1", 0, hostname("lab-1")), gpuNode("lab-2", 0, hostname("lab-2")), gpuNode("lab-3", 0, hostname("lab-3")),
		localVolumeOn("disk-2", "lab-2"), boundClaimOn("data", "disk-2"), boundClaimOn("unbound", ""),
		gpuPod("web", 0, withClaim("data")))
	res := f.step()
	if res == nil || res.SelectedNode != "lab-2" {
		t.Fatalf("pod on lab-2's volume: %+v", res)
	}
	f.add(gpuPod("stuck", 0, withClaim("unbound")))
	res = f.step()
	if res == nil || res.SelectedNode != "" || res.Message != "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims." {
		t.Fatalf("unbound claim: %+v", res)
	}
	f.add(gpuPod("orphan", 0, withClaim("nope")))
	res = f.step()
	if res == nil || res.Message != `0/3 nodes are available: persistentvolumeclaim "nope" not found.` {
		t.Fatalf("missing claim: %+v", res)
	}
}
