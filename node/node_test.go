package node_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/agent"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/node"
)

func startControlPlane(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	cfg := controlplane.DefaultConfig(filepath.Join(t.TempDir(), "server"))
	cfg.API.Listen = "127.0.0.1:0"
	cp, err := controlplane.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	return cp
}

// A node on the simulated runtime without a pod network registers, turns
// Ready, says so on its Node (labels) and in Info, and stops twice.
func TestStartSimulatedNode(t *testing.T) {
	cp := startControlPlane(t)
	cfg := node.DefaultConfig(t.TempDir())
	cfg.Name, cfg.Runtime, cfg.GPUs, cfg.Network = "n1", node.RuntimeFake, "sim:dgxa100", node.NetworkAuto
	cfg.Listen = "127.0.0.1:0"
	creds, err := cp.IssueNodeCredentials("n1", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Credentials = &creds
	cfg.TuneAgent = func(c *agent.Config) { c.HeartbeatInterval = 200 * time.Millisecond }
	n, err := node.Start(context.Background(), cfg, cp.Local())
	if err != nil {
		t.Fatal(err)
	}
	if err := n.WaitReady(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	info := n.Info()
	if !info.Simulated || info.PodNetwork != node.NetworkNone || info.Addr == "" || !strings.Contains(info.GPUs, "A100") {
		t.Errorf("info = %+v; want simulated, no pod network, an agent address and the A100s", info)
	}
	if !strings.Contains(info.Limits, "lab 1's page on localhost:30080") || strings.Contains(info.Limits, "\n") {
		t.Errorf("limits = %q; want one line naming lab 1's page", info.Limits)
	}
	o, err := cp.Local().Get(context.Background(), api.MustKindOf(&api.Node{}), "", "n1")
	if err != nil {
		t.Fatal(err)
	}
	l := o.(*api.Node).Labels
	if l[api.LabelSkiffPodNetwork] != api.PodNetworkNone || l[api.LabelSkiffSimulated] != "true" {
		t.Errorf("node labels %v; want %s=%s and %s=true", l, api.LabelSkiffPodNetwork, api.PodNetworkNone, api.LabelSkiffSimulated)
	}
	if err := n.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	if err := n.Stop(); err != nil {
		t.Errorf("second stop: %v", err)
	}
	select {
	case <-n.Done():
	default:
		t.Error("Done not closed after Stop")
	}
}

func TestConfigValidateReportsAll(t *testing.T) {
	cfg := node.Config{Runtime: "docker", Network: "flannel", Listen: "127.0.0.1:0", NetNS: &node.NetNS{Wrap: []string{"ip", "netns", "exec", "h1"}}}
	err := cfg.Validate()
	for _, want := range []string{"node name is required", "data dir is required", `runtime "docker"`, `network "flannel"`, "node credentials", "netns: both Wrap and Do are required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v; want it to mention %q", err, want)
		}
	}
	// Bad config: nothing starts, nothing is created.
	dir := filepath.Join(t.TempDir(), "never")
	cfg.DataDir = dir
	if _, err := node.Start(context.Background(), cfg, nil); err == nil {
		t.Fatal("Start with a bad config succeeded")
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("data dir after a refused start: %v; want none", err)
	}
}

func TestResolveNetwork(t *testing.T) {
	tests := []struct {
		name, mode string
		simulated  bool
		want       string
		wantErr    bool
	}{
		{"none asked", node.NetworkNone, false, node.NetworkNone, false},
		{"cni asked", node.NetworkCNI, true, node.NetworkCNI, false},
		{"auto on a simulated node", node.NetworkAuto, true, node.NetworkNone, false},
		{"unknown", "flannel", false, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := node.ResolveNetwork(tt.mode, tt.simulated)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("ResolveNetwork(%q, %v) = %q, %v; want %q, error %v", tt.mode, tt.simulated, got, err, tt.want, tt.wantErr)
			}
		})
	}
}
