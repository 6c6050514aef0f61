package network

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/agent/network/netnstest"
	"skiff.dev/skiff/api"
)

func node(name, cidr, ip string) *api.Node {
	n := &api.Node{}
	n.Name, n.Spec.PodCIDR = name, cidr
	if ip != "" {
		n.Status.Addresses = []api.NodeAddress{{Type: "InternalIP", Address: ip}}
	}
	return n
}

func TestDesiredRoutes(t *testing.T) {
	nodes := []*api.Node{
		node("a", "10.244.0.0/24", "192.168.77.1"),
		node("b", "10.244.1.0/24", "192.168.77.2"),
		node("c", "", "192.168.77.3"),              // no CIDR yet
		node("d", "10.244.3.0/24", ""),             // no address
		node("e", "10.244.4.0/24", "127.0.0.1"),    // on loopback
		node("f", "10.244.5.0/24", "192.168.77.1"), // shares a's machine
		node("g", "10.244.6.7/24", "192.168.77.7"), // unmasked CIDR
	}
	got := DesiredRoutes(nodes, "a")
	want := map[string]string{"10.244.1.0/24": "192.168.77.2", "10.244.6.0/24": "192.168.77.7"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("route %s via %q, want %q", k, got[k], v)
		}
	}
}

// TestRoutesBetweenNetNS: two "hosts" on one link, each with a "pod"
// address behind a bridge; the host-gateway routes Routes
// installs let the pods reach each other, and removing a node removes
// its route.
func TestRoutesBetweenNetNS(t *testing.T) {
	netnstest.Require(t)
	a, b := netnstest.New(t, "skiff-rta"), netnstest.New(t, "skiff-rtb")
	netnstest.Link(t, a, b, "192.168.77.1/24", "192.168.77.2/24")
	for _, h := range []struct {
		ns   *netnstest.NS
		addr string
	}{{a, "10.244.0.1/24"}, {b, "10.244.1.1/24"}} {
		h.ns.MustRun(t, "ip", "link", "add", "pods", "type", "bridge")
		h.ns.MustRun(t, "ip", "addr", "add", h.addr, "dev", "pods")
		h.ns.MustRun(t, "ip", "link", "set", "pods", "up")
		h.ns.MustRun(t, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodes := []*api.Node{node("a", "10.244.0.0/24", "192.168.77.1"), node("b", "10.244.1.0/24", "192.168.77.2")}
	ra := &Routes{nodeName: "a", wrap: a.Wrap(), log: slog.New(slog.DiscardHandler)}
	rb := &Routes{nodeName: "b", wrap: b.Wrap(), log: slog.New(slog.DiscardHandler)}
	for _, r := range []*Routes{ra, rb} {
		if err := r.apply(ctx, DesiredRoutes(nodes, r.nodeName)); err != nil {
			t.Fatal(err)
		}
		if err := r.apply(ctx, DesiredRoutes(nodes, r.nodeName)); err != nil { // idempotent
			t.Fatal(err)
		}
	}
	if out := a.MustRun(t, "ip", "route", "show", "proto", RouteProto); !strings.Contains(out, "10.244.1.0/24 via 192.168.77.2") {
		t.Fatalf("routes of a: %q", out)
	}
	// A "pod" address of a reaches one of b, sourced from a's pod CIDR.
	ln, err := b.Listen("tcp", "10.244.1.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	err = a.Do(func() error {
		d := net.Dialer{Timeout: 3 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP("10.244.0.1")}}
		c, err := d.Dial("tcp", ln.Addr().String())
		if err == nil {
			c.Close()
		}
		return err
	})
	if err != nil {
		t.Fatalf("pod address of a to b's: %v", err)
	}
	// b leaves: a's route goes.
	if err := ra.apply(ctx, DesiredRoutes(nodes[:1], "a")); err != nil {
		t.Fatal(err)
	}
	if out := a.MustRun(t, "ip", "route", "show", "proto", RouteProto); strings.TrimSpace(out) != "" {
		t.Fatalf("stale route left: %q", out)
	}
}
