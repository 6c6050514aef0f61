package patch

import (
	"encoding/json"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"skiff.dev/skiff/api"
)

// ToKubernetes carries what skiff has into the Kubernetes struct: the same
// JSON comes back out.
func TestToKubernetes(t *testing.T) {
	dir := "Directory"
	pod := &api.Pod{
		TypeMeta:   api.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: api.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"app": "x"}},
		Spec: api.PodSpec{
			HostNetwork: true,
			Containers:  []api.Container{{Name: "c", Image: "busybox", Ports: []api.ContainerPort{{ContainerPort: 80, HostPort: 8080}}}},
			Volumes:     []api.Volume{{Name: "root", HostPath: &api.HostPathVolumeSource{Path: "/", Type: &dir}}},
		},
	}
	dep := &api.Deployment{
		TypeMeta:   api.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: api.ObjectMeta{Name: "d", Namespace: "ns"},
		Spec:       api.DeploymentSpec{Template: api.PodTemplateSpec{Spec: pod.Spec}},
	}
	tests := []struct {
		name  string
		obj   api.Object
		check func(t *testing.T, out any)
	}{
		{"pod", pod, func(t *testing.T, out any) {
			p := out.(*corev1.Pod)
			if !p.Spec.HostNetwork || p.Spec.Volumes[0].HostPath == nil || p.Spec.Volumes[0].HostPath.Path != "/" || p.Spec.Containers[0].Ports[0].HostPort != 8080 {
				t.Errorf("pod spec lost on the way: %+v", p.Spec)
			}
		}},
		{"deployment", dep, func(t *testing.T, out any) {
			d := out.(*appsv1.Deployment)
			if d.Spec.Template.Spec.Volumes[0].HostPath.Path != "/" {
				t.Errorf("template lost on the way: %+v", d.Spec.Template.Spec)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tm := tt.obj.GetTypeMeta()
			out, err := ToKubernetes(tm.APIVersion, tm.Kind, tt.obj)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, out)
			want, _ := json.Marshal(tt.obj)
			var back map[string]any
			got, _ := json.Marshal(out)
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatal(err)
			}
			var wantMap map[string]any
			_ = json.Unmarshal(want, &wantMap)
			// Kubernetes' structs add empty fields of their own
			// (creationTimestamp: null, status: {}); what skiff sent must
			// all be there, equal.
			if missing := missingFrom(wantMap, back, ""); missing != "" {
				t.Errorf("%s: not carried over: %s", tt.name, missing)
			}
		})
	}
}

func TestToKubernetesUnknownKind(t *testing.T) {
	_, err := ToKubernetes("skiff.dev/v1", "PodTrace", &api.PodTrace{})
	if !errors.Is(err, ErrNoSchema) {
		t.Fatalf("err = %v, want ErrNoSchema", err)
	}
}

// missingFrom names the first path of want that got lacks or has otherwise.
func missingFrom(want, got any, path string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return path
		}
		for k, v := range w {
			if m := missingFrom(v, g[k], path+"."+k); m != "" {
				return m
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return path
		}
		for i := range w {
			if m := missingFrom(w[i], g[i], path); m != "" {
				return m
			}
		}
	default:
		if want != got {
			return path
		}
	}
	return ""
}
