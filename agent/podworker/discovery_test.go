package podworker

import (
	"strings"
	"testing"

	"skiff.dev/skiff/api"
)

func TestServiceLinkEnv(t *testing.T) {
	s := &api.Service{}
	s.Name = "nginx-demo"
	s.Spec.ClusterIP = "10.96.0.5"
	s.Spec.Ports = []api.ServicePort{{Name: "http", Port: 80}, {Name: "metrics", Port: 9090, Protocol: "TCP"}}
	headless := &api.Service{}
	headless.Name = "db"
	headless.Spec.ClusterIP = "None"
	headless.Spec.Ports = []api.ServicePort{{Port: 5432}}
	got := map[string]string{}
	for _, kv := range serviceLinkEnv([]*api.Service{s, headless}) {
		got[kv[0]] = kv[1]
	}
	want := map[string]string{
		"NGINX_DEMO_SERVICE_HOST":         "10.96.0.5",
		"NGINX_DEMO_SERVICE_PORT":         "80",
		"NGINX_DEMO_SERVICE_PORT_HTTP":    "80",
		"NGINX_DEMO_SERVICE_PORT_METRICS": "9090",
		"NGINX_DEMO_PORT":                 "tcp://10.96.0.5:80",
		"NGINX_DEMO_PORT_80_TCP":          "tcp://10.96.0.5:80",
		"NGINX_DEMO_PORT_80_TCP_PROTO":    "tcp",
		"NGINX_DEMO_PORT_80_TCP_PORT":     "80",
		"NGINX_DEMO_PORT_80_TCP_ADDR":     "10.96.0.5",
		"NGINX_DEMO_PORT_9090_TCP":        "tcp://10.96.0.5:9090",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s=%q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if strings.HasPrefix(k, "DB_") {
			t.Errorf("headless service got %s", k)
		}
	}
}

func TestHostsFile(t *testing.T) {
	s := &api.Service{}
	s.Name = "web"
	s.Spec.ClusterIP = "10.96.0.7"
	got := string(hostsFile("web-abc", "", "10.244.0.5", "demo", []*api.Service{s}))
	for _, want := range []string{
		"127.0.0.1\tlocalhost",
		"10.244.0.5\tweb-abc",
		"10.96.0.7\tweb web.demo web.demo.svc web.demo.svc.cluster.local",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("hosts file lacks %q:\n%s", want, got)
		}
	}
	// A StatefulSet pod: hostname web-0 under the headless Service nginx.
	got = string(hostsFile("web-0", "nginx", "10.244.0.6", "demo", nil))
	if want := "10.244.0.6\tweb-0.nginx.demo.svc.cluster.local\tweb-0\n"; !strings.Contains(got, want) {
		t.Errorf("hosts file lacks %q:\n%s", want, got)
	}
}
