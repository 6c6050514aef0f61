package network

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The nat table of a node with two pods (uid-123 with a hostPort, uid-456
// without), as iptables-save printed it after the bridge and portmap
// plugins' ADD (the second pod's lines added by hand, same shape).
func TestCNIRuleCleanup(t *testing.T) {
	save, err := os.ReadFile("testdata/iptables-save-nat.txt")
	if err != nil {
		t.Fatal(err)
	}
	restore, chains := cniRuleCleanup(string(save), "skiff", map[string]bool{"uid-123": true})
	want := `*nat
:CNI-DN-e4fdc69f56e307676428a - [0:0]
:CNI-e4fdc69f56e307676428a422 - [0:0]
-D POSTROUTING -s 10.99.0.2/32 -m comment --comment "name: \"skiff\" id: \"uid-123\"" -j CNI-e4fdc69f56e307676428a422
-D CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \"skiff\" id: \"uid-123\"" -m multiport --dports 8080 -j CNI-DN-e4fdc69f56e307676428a
-X CNI-DN-e4fdc69f56e307676428a
-X CNI-e4fdc69f56e307676428a422
COMMIT
`
	if string(restore) != want {
		t.Errorf("restore input:\n%s\nwant:\n%s", restore, want)
	}
	if !slices.Equal(chains, []string{"CNI-DN-e4fdc69f56e307676428a", "CNI-e4fdc69f56e307676428a422"}) {
		t.Errorf("chains %v", chains)
	}
	if strings.Contains(string(restore), "uid-456") || strings.Contains(string(restore), "HOSTPORT-MASQ") {
		t.Errorf("touches another pod's or the shared chains:\n%s", restore)
	}
	for name, c := range map[string]struct {
		network string
		uids    map[string]bool
	}{
		"unknown pod":     {"skiff", map[string]bool{"uid-999": true}},
		"another network": {"other", map[string]bool{"uid-123": true}},
	} {
		if r, ch := cniRuleCleanup(string(save), c.network, c.uids); r != nil || ch != nil {
			t.Errorf("%s: %s %v, want nothing", name, r, ch)
		}
	}
}

func TestResetRoutes(t *testing.T) {
	routes := "10.244.1.0/24 via 10.0.0.2 dev eth0 proto 157 \n10.244.2.0/24 via 10.0.0.3 dev eth0 proto 157 \n"
	var ran []string
	run := func(_ context.Context, _ []byte, argv ...string) ([]byte, error) {
		ran = append(ran, strings.Join(argv, " "))
		if slices.Contains(argv, "show") {
			out := routes
			routes = ""
			return []byte(out), nil
		}
		return nil, nil
	}
	var said []string
	if err := ResetRoutes(context.Background(), []string{"ip", "netns", "exec", "h1"}, run, func(s string) { said = append(said, s) }); err != nil {
		t.Fatal(err)
	}
	wantRan := []string{
		"ip netns exec h1 ip -4 route show proto 157",
		"ip netns exec h1 ip -4 route del 10.244.1.0/24 proto 157",
		"ip netns exec h1 ip -4 route del 10.244.2.0/24 proto 157",
	}
	if !slices.Equal(ran, wantRan) {
		t.Errorf("ran %q, want %q", ran, wantRan)
	}
	if !slices.Equal(said, []string{"removed route 10.244.1.0/24 via 10.0.0.2", "removed route 10.244.2.0/24 via 10.0.0.3"}) {
		t.Errorf("said %q", said)
	}
	said = nil
	if err := ResetRoutes(context.Background(), nil, run, func(s string) { said = append(said, s) }); err != nil || len(said) != 0 {
		t.Errorf("second run: %v %q, want nothing", err, said)
	}
}

func TestWriteConfFile(t *testing.T) {
	c := DefaultConfig("10.244.3.0/24")
	c.ConfFile = filepath.Join(t.TempDir(), "net.d", ConfFileName)
	if err := c.WriteConfFile(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(c.ConfFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"subnet": "10.244.3.0/24"`) || !strings.Contains(string(raw), `"bridge": "skiff0"`) {
		t.Errorf("conflist:\n%s", raw)
	}
}
