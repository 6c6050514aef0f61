package apiserver

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"skiff.dev/skiff/api"
)

func newService(name, typ string, ports ...api.ServicePort) *api.Service {
	s := &api.Service{Spec: api.ServiceSpec{Type: typ, Selector: map[string]string{"app": name}, Ports: ports}}
	s.Name, s.Namespace = name, DefaultNamespace
	if len(ports) == 0 {
		s.Spec.Ports = []api.ServicePort{{Port: 80}}
	}
	return s
}

func createService(t testing.TB, r *Registry, s *api.Service) (*api.Service, error) {
	t.Helper()
	out, err := r.Create(context.Background(), serviceKind, s)
	if err != nil {
		return nil, err
	}
	return out.(*api.Service), nil
}

func mustCreateService(t testing.TB, r *Registry, s *api.Service) *api.Service {
	t.Helper()
	out, err := createService(t, r, s)
	if err != nil {
		t.Fatalf("create service %s: %v", s.Name, err)
	}
	return out
}

func TestServiceClusterIP(t *testing.T) {
	cidr := netip.MustParsePrefix(DefaultServiceCIDR)
	tests := []struct {
		name    string
		ip      string
		wantIP  string // "" = any usable address of the CIDR
		wantErr string
	}{
		{name: "allocated"},
		{name: "given", ip: "10.96.0.10", wantIP: "10.96.0.10"},
		{name: "headless", ip: "None", wantIP: "None"},
		{name: "outside the range", ip: "10.97.0.10", wantErr: `spec.clusterIPs[0]: Invalid value: "10.97.0.10": failed to allocate IP 10.97.0.10: the provided IP (10.97.0.10) is not in the valid range. The range of valid IPs is 10.96.0.0/16`},
		{name: "reserved first address", ip: "10.96.0.1", wantErr: "not in the valid range"},
		{name: "network address", ip: "10.96.0.0", wantErr: "not in the valid range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newEnv(t).reg
			s := newService("web", "")
			s.Spec.ClusterIP = tt.ip
			out, err := createService(t, r, s)
			if tt.wantErr != "" {
				if err == nil || !api.IsInvalid(err) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want Invalid with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := out.Spec.ClusterIP
			if len(out.Spec.ClusterIPs) != 1 || out.Spec.ClusterIPs[0] != got {
				t.Errorf("clusterIPs %v, want [%s]", out.Spec.ClusterIPs, got)
			}
			if tt.wantIP != "" {
				if got != tt.wantIP {
					t.Errorf("clusterIP %q, want %q", got, tt.wantIP)
				}
				return
			}
			a, err := netip.ParseAddr(got)
			if err != nil || !cidr.Contains(a) || a == netip.MustParseAddr("10.96.0.1") {
				t.Errorf("clusterIP %q, want a usable address of %s", got, cidr)
			}
		})
	}
}

func TestServiceClusterIPClash(t *testing.T) {
	r := newEnv(t).reg
	a := newService("a", "")
	a.Spec.ClusterIP = "10.96.0.10"
	mustCreateService(t, r, a)
	b := newService("b", "")
	b.Spec.ClusterIP = "10.96.0.10"
	if _, err := createService(t, r, b); err == nil || !strings.Contains(err.Error(), "provided IP is already allocated") {
		t.Fatalf("err %v, want already allocated", err)
	}
	// Deleting a frees its IP.
	if _, _, err := r.Delete(t.Context(), serviceKind, DefaultNamespace, "a", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	mustCreateService(t, r, b)
}

func TestServiceClusterIPSmallRangeFull(t *testing.T) {
	r := newEnv(t).reg
	if err := r.SetServiceCIDR(netip.MustParsePrefix("10.100.0.0/29")); err != nil {
		t.Fatal(err)
	}
	// /29: 8 addresses, less network, .1 and broadcast: 5.
	seen := map[string]bool{}
	for i := range 5 {
		s := mustCreateService(t, r, newService(fmt.Sprintf("s%d", i), ""))
		if seen[s.Spec.ClusterIP] {
			t.Fatalf("clusterIP %s given twice", s.Spec.ClusterIP)
		}
		seen[s.Spec.ClusterIP] = true
	}
	if _, err := createService(t, r, newService("s5", "")); err == nil || !strings.Contains(err.Error(), "range is full") {
		t.Fatalf("err %v, want range is full", err)
	}
	// Headless services need no IP.
	h := newService("headless", "")
	h.Spec.ClusterIP = "None"
	mustCreateService(t, r, h)
}

func TestServiceNodePort(t *testing.T) {
	r := newEnv(t).reg
	given := newService("web", api.ServiceTypeNodePort, api.ServicePort{Name: "http", Port: 80, NodePort: 30080}, api.ServicePort{Name: "https", Port: 443})
	web := mustCreateService(t, r, given)
	if web.Spec.Ports[0].NodePort != 30080 {
		t.Errorf("nodePort %d, want 30080", web.Spec.Ports[0].NodePort)
	}
	if p := web.Spec.Ports[1].NodePort; p < api.NodePortMin || p > api.NodePortMax || p == 30080 {
		t.Errorf("allocated nodePort %d", p)
	}

	clash := newService("other", api.ServiceTypeNodePort, api.ServicePort{Port: 80, NodePort: 30080})
	_, err := createService(t, r, clash)
	want := "spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"
	if err == nil || !api.IsInvalid(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err %v, want 422 with %q", err, want)
	}
	if se, ok := err.(*api.StatusError); !ok || se.Status.Code != 422 {
		t.Errorf("err %#v, want a 422 StatusError", err)
	}

	// Updating web without node ports keeps them (carried over); its own
	// ports do not clash with themselves.
	u := api.Clone(web)
	u.ResourceVersion = ""
	u.Labels = map[string]string{"x": "y"}
	out, err := r.Update(t.Context(), serviceKind, u)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.(*api.Service); got.Spec.Ports[0].NodePort != 30080 || got.Spec.Ports[1].NodePort != web.Spec.Ports[1].NodePort || got.Spec.ClusterIP != web.Spec.ClusterIP {
		t.Errorf("after update %+v, want ports and IP kept", got.Spec)
	}

	// An update that adds a port allocates for it.
	u = api.Clone(out.(*api.Service))
	u.Spec.Ports = append(u.Spec.Ports, api.ServicePort{Name: "metrics", Port: 9100})
	out, err = r.Update(t.Context(), serviceKind, u)
	if err != nil {
		t.Fatal(err)
	}
	if p := out.(*api.Service).Spec.Ports[2].NodePort; p == 0 {
		t.Error("added port got no nodePort")
	}

	// Delete frees 30080.
	if _, _, err := r.Delete(t.Context(), serviceKind, DefaultNamespace, "web", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	mustCreateService(t, r, clash)
}

// A new registry over the same store (a restart) sees what is allocated.
func TestServiceAllocationSurvivesRestart(t *testing.T) {
	e := newEnv(t)
	a := newService("a", api.ServiceTypeNodePort, api.ServicePort{Port: 80, NodePort: 30080})
	a.Spec.ClusterIP = "10.96.0.10"
	mustCreateService(t, e.reg, a)

	r2 := NewRegistry(e.st, nil)
	b := newService("b", api.ServiceTypeNodePort, api.ServicePort{Port: 80, NodePort: 30080})
	if _, err := createService(t, r2, b); err == nil || !strings.Contains(err.Error(), "provided port is already allocated") {
		t.Fatalf("err %v, want nodePort clash after restart", err)
	}
	c := newService("c", "")
	c.Spec.ClusterIP = "10.96.0.10"
	if _, err := createService(t, r2, c); err == nil || !strings.Contains(err.Error(), "provided IP is already allocated") {
		t.Fatalf("err %v, want clusterIP clash after restart", err)
	}
}

// Concurrent creates never share an address.
func TestServiceAllocationConcurrent(t *testing.T) {
	r := newEnv(t).reg
	if err := r.SetServiceCIDR(netip.MustParsePrefix("10.100.0.0/28")); err != nil {
		t.Fatal(err)
	}
	const n = 13 // 16 - network - .1 - broadcast: all of them
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = r.Create(context.Background(), serviceKind, newService(fmt.Sprintf("s%d", i), api.ServiceTypeNodePort))
		})
	}
	wg.Wait()
	ips, ports := map[string]bool{}, map[int32]bool{}
	objs, _, err := r.List(t.Context(), serviceKind, "", api.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("create s%d: %v", i, err)
		}
	}
	for _, o := range objs {
		s := o.(*api.Service)
		if ips[s.Spec.ClusterIP] || ports[s.Spec.Ports[0].NodePort] {
			t.Errorf("%s: %s/%d given twice", s.Name, s.Spec.ClusterIP, s.Spec.Ports[0].NodePort)
		}
		ips[s.Spec.ClusterIP], ports[s.Spec.Ports[0].NodePort] = true, true
	}
	if len(objs) != n {
		t.Errorf("%d services, want %d", len(objs), n)
	}
}
