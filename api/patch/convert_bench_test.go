package patch

import (
	"testing"

	"skiff.dev/skiff/api"
)

func benchPod() *api.Pod {
	p := &api.Pod{}
	p.Name, p.Namespace = "web-1", "default"
	p.Labels = map[string]string{"app": "web"}
	p.Spec.Containers = []api.Container{{Name: "c", Image: "nginx:1.27", Ports: []api.ContainerPort{{ContainerPort: 80}}}}
	return p
}

func BenchmarkToKubernetesPod(b *testing.B) {
	p := benchPod()
	for b.Loop() {
		if _, err := ToKubernetes("v1", "Pod", p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRoundTripPod(b *testing.B) {
	p := benchPod()
	kt, _ := KubernetesType("v1", "Pod")
	for b.Loop() {
		if _, err := roundTrip(p, kt); err != nil {
			b.Fatal(err)
		}
	}
}
