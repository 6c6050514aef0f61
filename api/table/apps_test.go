package table

import (
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"skiff.dev/skiff/api"
)

func TestDaemonSetColumns(t *testing.T) {
	ds := &api.DaemonSet{
		ObjectMeta: meta("kube-system", "nvidia-device-plugin-daemonset", 3*time.Minute),
		Spec: api.DaemonSetSpec{
			Selector: &api.LabelSelector{MatchLabels: map[string]string{"name": "nvidia-device-plugin-ds"}},
			Template: api.PodTemplateSpec{Spec: api.PodSpec{
				NodeSelector: map[string]string{"nvidia.com/gpu.present": "true"},
				Containers:   []api.Container{{Name: "nvidia-device-plugin-ctr", Image: "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"}},
			}},
		},
		Status: api.DaemonSetStatus{DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, NumberReady: 2, UpdatedNumberScheduled: 3, NumberAvailable: 2},
	}
	p := For(api.MustKindOf(ds))
	if got := Headers(p.Columns, true); !reflect.DeepEqual(got, []string{"NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE SELECTOR", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"}) {
		t.Errorf("wide headers %v", got)
	}
	want := []string{"nvidia-device-plugin-daemonset", "3", "3", "2", "3", "2", "nvidia.com/gpu.present=true", "3m",
		"nvidia-device-plugin-ctr", "nvcr.io/nvidia/k8s-device-plugin:v0.17.1", "name=nvidia-device-plugin-ds"}
	if got := row(p, ds, true); !reflect.DeepEqual(got, want) {
		t.Errorf("row %q, want %q", got, want)
	}
	ds.Spec.Template.Spec.NodeSelector = nil
	if got := row(p, ds, false)[6]; got != "<none>" {
		t.Errorf("no node selector: %q, want <none>", got)
	}
}

func TestControllerRevisionColumns(t *testing.T) {
	yes := true
	r := &api.ControllerRevision{
		ObjectMeta: meta("default", "web-7c5d", time.Minute),
		Revision:   2,
	}
	p := For(api.MustKindOf(r))
	if got := Headers(p.Columns, false); !reflect.DeepEqual(got, []string{"NAME", "CONTROLLER", "REVISION", "AGE"}) {
		t.Errorf("headers %v", got)
	}
	if got := row(p, r, false); !reflect.DeepEqual(got, []string{"web-7c5d", "<none>", "2", "60s"}) {
		t.Errorf("orphan row %q", got)
	}
	r.OwnerReferences = []api.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: "u", Controller: &yes}}
	if got := row(p, r, false)[1]; got != "statefulset.apps/web" {
		t.Errorf("controller %q, want statefulset.apps/web", got)
	}
}

func TestStatefulSetAndPDBColumns(t *testing.T) {
	three := int32(3)
	s := &api.StatefulSet{ObjectMeta: meta("default", "web", time.Minute),
		Spec:   api.StatefulSetSpec{Replicas: &three, Template: api.PodTemplateSpec{Spec: api.PodSpec{Containers: []api.Container{{Name: "nginx", Image: "nginx-slim:0.21"}}}}},
		Status: api.StatefulSetStatus{ReadyReplicas: 2}}
	p := For(api.MustKindOf(s))
	if got := Headers(p.Columns, true); !reflect.DeepEqual(got, []string{"NAME", "READY", "AGE", "CONTAINERS", "IMAGES"}) {
		t.Errorf("wide headers %v", got)
	}
	if got := row(p, s, true); !reflect.DeepEqual(got, []string{"web", "2/3", "60s", "nginx", "nginx-slim:0.21"}) {
		t.Errorf("row %q", got)
	}
	two := intstr.FromInt32(2)
	pdb := &api.PodDisruptionBudget{ObjectMeta: meta("default", "zk-pdb", time.Hour), Spec: api.PodDisruptionBudgetSpec{MinAvailable: &two},
		Status: api.PodDisruptionBudgetStatus{DisruptionsAllowed: 1}}
	p = For(api.MustKindOf(pdb))
	if got := Headers(p.Columns, false); !reflect.DeepEqual(got, []string{"NAME", "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "AGE"}) {
		t.Errorf("headers %v", got)
	}
	if got := row(p, pdb, false); !reflect.DeepEqual(got, []string{"zk-pdb", "2", "N/A", "1", "60m"}) {
		t.Errorf("row %q", got)
	}
}
