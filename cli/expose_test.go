package cli

import (
	"strings"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

func TestExpose(t *testing.T) {
	fc := newFake(getFixtures()...)
	res := run(t, fc, "", "expose", "deployment", "nginx-demo", "--port", "80", "--type", "NodePort", "--node-port", "30080", "--name", "nginx-np", "-n", "gpu-demo")
	if res.code != 0 {
		t.Fatalf("expose: %+v", res)
	}
	wantLines(t, res.out, "service/nginx-np exposed")
	s, err := client.Get[*api.Service](t.Context(), fc, "gpu-demo", "nginx-np")
	if err != nil {
		t.Fatal(err)
	}
	d, _ := client.Get[*api.Deployment](t.Context(), fc, "gpu-demo", "nginx-demo")
	for k, v := range d.Spec.Selector.MatchLabels {
		if s.Spec.Selector[k] != v {
			t.Errorf("selector %v, want the deployment's %v", s.Spec.Selector, d.Spec.Selector.MatchLabels)
		}
	}
	if p := s.Spec.Ports[0]; s.Spec.Type != "NodePort" || p.Port != 80 || p.NodePort != 30080 || p.TargetPort.IntValue() != 80 {
		t.Errorf("service spec %+v", s.Spec)
	}
	res = run(t, fc, "", "expose", "deployment/nginx-demo", "--port", "8080", "--target-port", "http", "--name", "web", "-n", "gpu-demo")
	wantLines(t, res.out, "service/web exposed")
	s, _ = client.Get[*api.Service](t.Context(), fc, "gpu-demo", "web")
	if s.Spec.Ports[0].TargetPort.String() != "http" || s.Spec.Type != "ClusterIP" {
		t.Errorf("named target port: %+v", s.Spec)
	}
	for _, bad := range [][]string{
		{"expose", "deployment", "nginx-demo", "-n", "gpu-demo"},
		{"expose", "pod", "x", "--port", "80"},
		{"expose", "deployment", "nginx-demo", "--port", "80", "--node-port", "30081", "-n", "gpu-demo"},
	} {
		if res := run(t, fc, "", bad...); res.code != 1 || !strings.Contains(res.err, "expose") {
			t.Errorf("%v: %+v", bad, res)
		}
	}
}
