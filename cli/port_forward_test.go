package cli

import (
	"fmt"
	"testing"

	"skiff.dev/skiff/api"
)

func TestParsePortPairs(t *testing.T) {
	tests := []struct {
		name    string
		specs   []string
		want    string
		wantErr bool
	}{
		{name: "same port", specs: []string{"80"}, want: "[{80 80}]"},
		{name: "local and remote", specs: []string{"8080:80", "8443:443"}, want: "[{8080 80} {8443 443}]"},
		{name: "free local port", specs: []string{":80"}, want: "[{0 80}]"},
		{name: "zero local port", specs: []string{"0:80"}, want: "[{0 80}]"},
		{name: "named remote", specs: []string{"8080:http"}, want: "[{8080 http}]"},
		{name: "named remote needs a local port", specs: []string{"http"}, wantErr: true},
		{name: "no remote", specs: []string{"8080:"}, wantErr: true},
		{name: "remote out of range", specs: []string{"8080:70000"}, wantErr: true},
		{name: "bad local", specs: []string{"x:80"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parsePortPairs(tt.specs)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parsePortPairs(%q) error %v, wantErr %v", tt.specs, err, tt.wantErr)
			}
			if err == nil && fmt.Sprint(got) != tt.want {
				t.Errorf("parsePortPairs(%q) = %v, want %s", tt.specs, got, tt.want)
			}
		})
	}
}

func TestRemotePortByName(t *testing.T) {
	pod := &api.Pod{}
	pod.Name = "web"
	pod.Spec.Containers = []api.Container{{Name: "c", Ports: []api.ContainerPort{{Name: "http", ContainerPort: 8080}}}}
	if p, err := remotePort(pod, "http"); err != nil || p != 8080 {
		t.Errorf("remotePort(http) = %d, %v; want 8080", p, err)
	}
	if _, err := remotePort(pod, "grpc"); err == nil {
		t.Error("remotePort(grpc) found a port the pod does not have")
	}
}
