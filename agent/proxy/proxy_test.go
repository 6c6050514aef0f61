package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/agent/network/netnstest"
	"skiff.dev/skiff/api"
)

func svc(ns, name, typ, ip string, ports ...api.ServicePort) *api.Service {
	s := &api.Service{}
	s.Namespace, s.Name = ns, name
	s.Spec.Type, s.Spec.ClusterIP, s.Spec.Ports = typ, ip, ports
	return s
}

func TestServicePorts(t *testing.T) {
	web := svc("default", "web", "NodePort", "10.96.0.10",
		api.ServicePort{Name: "http", Port: 80, NodePort: 30080},
		api.ServicePort{Name: "metrics", Port: 9090})
	headless := svc("default", "db", "ClusterIP", "None", api.ServicePort{Port: 5432})
	ep := &api.Endpoints{Subsets: []api.EndpointSubset{
		{
			Addresses:         []api.EndpointAddress{{IP: "10.244.1.3"}, {IP: "10.244.0.2"}},
			NotReadyAddresses: []api.EndpointAddress{{IP: "10.244.0.9"}},
			Ports:             []api.EndpointPort{{Name: "http", Port: 8080}, {Name: "metrics", Port: 9090}},
		},
		{Addresses: []api.EndpointAddress{{IP: "10.244.2.4"}}, Ports: []api.EndpointPort{{Name: "http", Port: 8081}}},
	}}
	got := ServicePorts([]*api.Service{web, headless}, map[string]*api.Endpoints{"default/web": ep})
	if len(got) != 2 {
		t.Fatalf("got %d ports, want 2 (headless left out): %+v", len(got), got)
	}
	http := got[0]
	if http.Name != "default/web:http" || http.NodePort != 30080 || http.Protocol != "tcp" {
		t.Errorf("http port %+v", http)
	}
	want := []Endpoint{{"10.244.0.2", 8080}, {"10.244.1.3", 8080}, {"10.244.2.4", 8081}}
	if fmt.Sprint(http.Endpoints) != fmt.Sprint(want) {
		t.Errorf("endpoints %v, want %v (ready only, sorted, per-pod target port)", http.Endpoints, want)
	}
	if m := got[1]; m.Name != "default/web:metrics" || len(m.Endpoints) != 2 {
		t.Errorf("metrics port %+v", m)
	}
}

func TestRules(t *testing.T) {
	ports := []ServicePort{
		{Name: "default/web:http", ClusterIP: "10.96.0.10", Port: 80, NodePort: 30080, Protocol: "tcp",
			Endpoints: []Endpoint{{"10.244.0.2", 80}, {"10.244.0.3", 80}, {"10.244.1.2", 80}}},
		{Name: "default/idle:80", ClusterIP: "10.96.0.11", Port: 80, Protocol: "tcp"},
	}
	stale := chainName(svcPrefix, "default/gone:80/tcp")
	restore, chains := Rules(ports, []string{"PREROUTING", "KUBE-SERVICES", ChainServices, stale})
	s := string(restore)
	for _, want := range []string{
		"--probability 0.3333333333", "--probability 0.5000000000",
		"DNAT --to-destination 10.244.1.2:80",
		"-d 10.96.0.10/32 -p tcp -m tcp --dport 80",
		"--dport 30080",
		"-m addrtype --dst-type LOCAL -j SKIFF-NODEPORTS",
		"-X " + stale,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("rules lack %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "10.96.0.11") {
		t.Errorf("a service without ready endpoints got rules:\n%s", s)
	}
	if strings.Contains(s, "KUBE-SERVICES") {
		t.Errorf("rules touch another proxy's chain:\n%s", s)
	}
	if len(chains) != 4+1+3 {
		t.Errorf("chains %v: want 4 base, 1 service, 3 endpoints", chains)
	}
	// Probabilities: rule i of n is 1/(n-i), the last rule unconditional.
	if n := strings.Count(s, "--mode random"); n != 2 {
		t.Errorf("%d random rules, want 2", n)
	}
}

// TestProxyInNetNS applies rules inside a throwaway "node" namespace with
// a "pod" namespace behind a veth, and checks localhost:NODEPORT, the
// node's IP:NODEPORT, the cluster IP from the pod (hairpin), that
// removing the endpoint stops traffic, and that Cleanup leaves nothing.
func TestProxyInNetNS(t *testing.T) {
	netnstest.Require(t)
	node := netnstest.New(t, "skiff-pxnode")
	pod := netnstest.New(t, "skiff-pxpod")
	netnstest.Link(t, node, pod, "10.244.0.1/24", "10.244.0.2/24")
	pod.MustRun(t, "ip", "route", "add", "default", "via", "10.244.0.1")
	node.MustRun(t, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")

	ln, err := pod.Listen("tcp", "10.244.0.2:8080")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); fmt.Fprintf(c, "hello from %s\n", c.LocalAddr()) }()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wrap := node.Wrap()
	if _, err := run(ctx, wrap, nil, "sysctl", "-q", "-w", "net.ipv4.conf.all.route_localnet=1"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Cleanup(context.Background(), wrap) })
	ports := []ServicePort{{Name: "default/web:http", ClusterIP: "10.96.0.10", Port: 80, NodePort: 30080, Protocol: "tcp",
		Endpoints: []Endpoint{{"10.244.0.2", 8080}}}}
	if err := Apply(ctx, wrap, ports); err != nil {
		t.Fatal(err)
	}
	if err := Apply(ctx, wrap, ports); err != nil { // idempotent
		t.Fatal(err)
	}
	get := func(ns *netnstest.NS, addr string) (string, error) {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		c, err := netnstest.Dialer(ns.Path())(dctx, "tcp", addr)
		if err != nil {
			return "", err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil && err != io.EOF {
			return "", err
		}
		return strings.TrimSpace(line), nil
	}
	for _, tc := range []struct {
		name string
		from *netnstest.NS
		addr string
	}{
		{"localhost node port", node, "127.0.0.1:30080"},
		{"node IP node port", node, "10.244.0.1:30080"},
		{"cluster IP from the pod (hairpin)", pod, "10.96.0.10:80"},
		{"node port from the pod", pod, "10.244.0.1:30080"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := get(tc.from, tc.addr)
			if err != nil || got != "hello from 10.244.0.2:8080" {
				t.Fatalf("%s: %q, %v", tc.addr, got, err)
			}
		})
	}
	jumpsCount := func() int {
		out := node.MustRun(t, "iptables-save", "-t", "nat")
		return strings.Count(out, "SKIFF-")
	}
	// No ready endpoint: no rules, no traffic.
	ports[0].Endpoints = nil
	if err := Apply(ctx, wrap, ports); err != nil {
		t.Fatal(err)
	}
	if got, err := get(node, "127.0.0.1:30080"); err == nil {
		t.Errorf("a service without endpoints answered: %q", got)
	}
	if err := Cleanup(ctx, wrap); err != nil {
		t.Fatal(err)
	}
	if n := jumpsCount(); n != 0 {
		t.Errorf("%d SKIFF- mentions left after Cleanup:\n%s", n, node.MustRun(t, "iptables-save", "-t", "nat"))
	}
}
