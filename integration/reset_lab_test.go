package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/agent/network"
	"skiff.dev/skiff/agent/podworker"
	"skiff.dev/skiff/agent/proxy"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/testwait"
	"skiff.dev/skiff/node"
)

// netLabReset is `skiff reset` (node.Reset) on host h of the net lab, as
// after Ctrl-C on skiff up: the node's agent stops, its pods' containers
// keep running with their network namespaces, CNI rules and bridge, and
// the service proxy's chains are left as a killed agent leaves them.
// After the reset none of it is there, the other node is untouched, and
// a second reset finds nothing to remove.
func netLabReset(t *testing.T, c client.Interface, a *runningAgent, h *netLabHost, dataDir, netnsPrefix string) {
	t.Helper()
	ctx := context.Background()
	began := time.Now()
	// Cordoned first, so the replicas that replace its pods go elsewhere.
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		n, err := client.Get[*api.Node](ctx, c, "", h.name)
		if err != nil {
			return false, err.Error()
		}
		n.Spec.Unschedulable = true
		_, err = c.Update(ctx, n)
		return err == nil, fmt.Sprint(err)
	})
	var uids []string
	var onNode []*api.Pod
	for _, p := range listPods(t, c, "", "") {
		if p.Spec.NodeName == h.name {
			uids, onNode = append(uids, p.UID), append(onNode, p)
		}
	}
	if len(uids) == 0 {
		t.Fatalf("no pod on %s to leave behind: %s", h.name, podSummary(listPods(t, c, "", "")))
	}
	a.kill(t)
	if err := proxy.Apply(ctx, h.ns.Wrap(), nil); err != nil { // a killed agent's chains
		t.Fatal(err)
	}
	nat := func() string {
		out, err := network.Run(ctx, h.ns.Wrap(), nil, "iptables-save", "-t", "nat")
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	mine := func() (left []string) {
		cs, err := h.rt.ListContainers(ctx, map[string]string{podworker.LabelNode: h.name})
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) > 0 {
			left = append(left, fmt.Sprintf("%d containers", len(cs)))
		}
		table := nat()
		for _, uid := range uids {
			if _, err := os.Stat(filepath.Join("/run/netns", netnsPrefix+uid)); err == nil {
				left = append(left, "netns "+netnsPrefix+uid)
			}
			if strings.Contains(table, `id: \"`+uid+`\"`) {
				left = append(left, "CNI rules of "+uid)
			}
		}
		if strings.Contains(table, "SKIFF-") {
			left = append(left, "SKIFF-* chains")
		}
		if _, err := network.Run(ctx, h.ns.Wrap(), nil, "ip", "link", "show", "dev", "skiff0"); err == nil {
			left = append(left, "bridge skiff0")
		}
		return left
	}
	before := mine()
	if len(before) != 2*len(uids)+3 { // containers, netns and rules per pod, chains, bridge
		t.Fatalf("before the reset, want containers, network namespaces, CNI rules, SKIFF-* chains and the bridge of %s; have %v", h.name, before)
	}
	var said []string
	cfg := node.ResetConfig{DataDir: dataDir, Runtime: h.rt, NetNS: &node.NetNS{Wrap: h.ns.Wrap(), Do: h.ns.Do},
		Say: func(s string) { said = append(said, s) }}
	removed, err := node.Reset(ctx, cfg)
	if err != nil || !removed {
		t.Fatalf("reset: %v (removed %v); said:\n%s", err, removed, strings.Join(said, "\n"))
	}
	if left := mine(); len(left) > 0 {
		t.Errorf("after the reset %s still has %v; reset said:\n%s", h.name, left, strings.Join(said, "\n"))
	}
	for _, want := range []string{"removed container ", "removed the network of pod " + onNode[0].Namespace + "/" + onNode[0].Name, "removed bridge skiff0", "removed iptables chain SKIFF-SERVICES (nat)"} {
		if !strings.Contains(strings.Join(said, "\n"), want) {
			t.Errorf("reset did not say %q:\n%s", want, strings.Join(said, "\n"))
		}
	}
	first := strings.Join(said, "\n")
	said = nil
	if removed, err := node.Reset(ctx, cfg); err != nil || removed {
		t.Errorf("second reset: %v, removed %v, said %q; want nothing to remove", err, removed, said)
	}
	t.Logf("skiff reset of %s (%d pods) in %v:\n%s", h.name, len(uids), time.Since(began).Round(time.Millisecond), first)
	// Its pods go from the API (their node is gone), so the lab's
	// cleanups find only the other node's.
	zero := int64(0)
	for _, p := range onNode {
		if err := c.Delete(ctx, api.MustKindOf(&api.Pod{}), p.Namespace, p.Name, api.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !api.IsNotFound(err) {
			t.Error(err)
		}
	}
}
