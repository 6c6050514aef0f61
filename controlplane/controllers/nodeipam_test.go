package controllers

import (
	"net/netip"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client/fake"
)

func ipamNode(name, cidr string) *api.Node {
	n := &api.Node{}
	n.Name, n.UID, n.Spec.PodCIDR = name, "uid-"+name, cidr
	if cidr != "" {
		n.Spec.PodCIDRs = []string{cidr}
	}
	return n
}

func newIPAM(t testing.TB, c *fake.Client, nodes Lister, cluster string, mask int) *NodeIPAMController {
	t.Helper()
	r, err := NewNodeIPAMController(c, nodes, netip.MustParsePrefix(cluster), mask, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestNodeIPAM(t *testing.T) {
	c := fake.New(ipamNode("a", ""), ipamNode("b", "10.244.0.0/24"), ipamNode("c", ""))
	nodes := fakeLister{c, api.MustKindOf(&api.Node{})}
	r := newIPAM(t, c, nodes, DefaultClusterCIDR, DefaultNodeMaskSize)
	for _, n := range []string{"a", "b", "c"} {
		if err := r.Reconcile(t.Context(), n); err != nil {
			t.Fatalf("reconcile %s: %v", n, err)
		}
	}
	want := map[string]string{"a": "10.244.1.0/24", "b": "10.244.0.0/24", "c": "10.244.2.0/24"}
	for n, w := range want {
		got := get[*api.Node](t, c, "", n).Spec
		if got.PodCIDR != w || len(got.PodCIDRs) != 1 || got.PodCIDRs[0] != w {
			t.Errorf("node %s: podCIDR %q %v, want %s", n, got.PodCIDR, got.PodCIDRs, w)
		}
	}
	// Repeating writes nothing.
	c.ClearActions()
	for _, n := range []string{"a", "b", "c"} {
		if err := r.Reconcile(t.Context(), n); err != nil {
			t.Fatal(err)
		}
	}
	if w := writes(c); len(w) != 0 {
		t.Errorf("second pass wrote %v", w)
	}
}

// A cache that has not shown the CIDRs just written must not make the
// controller hand out one twice.
func TestNodeIPAMStaleCache(t *testing.T) {
	a, b := ipamNode("a", ""), ipamNode("b", "")
	c := fake.New(a, b)
	r := newIPAM(t, c, newStaticLister(a, b), DefaultClusterCIDR, DefaultNodeMaskSize)
	for _, n := range []string{"a", "b", "a"} {
		if err := r.Reconcile(t.Context(), n); err != nil {
			t.Fatal(err)
		}
	}
	ga, gb := get[*api.Node](t, c, "", "a").Spec.PodCIDR, get[*api.Node](t, c, "", "b").Spec.PodCIDR
	if ga == gb || ga == "" || gb == "" {
		t.Fatalf("pod CIDRs %q and %q, want two different ones", ga, gb)
	}
}

func TestNodeIPAMFull(t *testing.T) {
	c := fake.New(ipamNode("a", ""), ipamNode("b", ""))
	r := newIPAM(t, c, fakeLister{c, api.MustKindOf(&api.Node{})}, "10.9.0.0/24", 25)
	if err := r.Reconcile(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	if err := r.Reconcile(t.Context(), "b"); err != nil {
		t.Fatal(err)
	}
	c3 := ipamNode("c", "")
	if _, err := c.Create(t.Context(), c3); err != nil {
		t.Fatal(err)
	}
	if err := r.Reconcile(t.Context(), "c"); err == nil {
		t.Fatal("third node got a CIDR out of a /24 cut in /25s")
	}
	if _, err := NewNodeIPAMController(c, nil, netip.MustParsePrefix("10.0.0.0/16"), 8, nil); err == nil {
		t.Error("mask shorter than the cluster CIDR accepted")
	}
}
