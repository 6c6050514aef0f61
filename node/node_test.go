package node_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"skiff.dev/skiff/agent"
	"skiff.dev/skiff/agent/devices/gpuplugin"
	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/agent/podworker"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/gputopology"
	"skiff.dev/skiff/controlplane"
	"skiff.dev/skiff/internal/testwait"
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
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		o, err := cp.Local().Get(context.Background(), api.MustKindOf(&api.Node{}), "", "n1")
		if err != nil {
			return false, err.Error()
		}
		l := o.(*api.Node).Labels
		return l[api.LabelSkiffDevicePlugin] == agent.DevicePluginBuiltin, fmt.Sprintf("labels %v; want %s=%s", l, api.LabelSkiffDevicePlugin, agent.DevicePluginBuiltin)
	})
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
	cfg := node.Config{Runtime: "docker", Network: "flannel", Listen: "127.0.0.1:0", NetNS: &node.NetNS{Wrap: []string{"ip", "netns", "exec", "h1"}}, DevicePlugin: "pod"}
	err := cfg.Validate()
	for _, want := range []string{"node name is required", "data dir is required", `runtime "docker"`, `network "flannel"`, "node credentials", "netns: both Wrap and Do are required",
		`--device-plugin "pod": want builtin`} {
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

// With --device-plugin=external the agent advertises no nvidia.com/gpu
// of its own. A plugin that registers through the directory a pod's
// hostPath /var/lib/kubelet/device-plugins reaches on this node
// (DATA-DIR/device-plugins), serving the same simulated GPUs (seeded by
// the node name, as the DaemonSet passes spec.nodeName), gives the node
// its eight GPUs, healthy under the agent's own UUIDs; when it ends they
// drop to 0, as on a kubelet.
func TestExternalDevicePlugin(t *testing.T) {
	cp := startControlPlane(t)
	dataDir := t.TempDir()
	cfg := node.DefaultConfig(dataDir)
	cfg.Name, cfg.Runtime, cfg.GPUs, cfg.Network = "gpu-1", node.RuntimeFake, "sim:dgxa100", node.NetworkNone
	cfg.DevicePlugin = agent.DevicePluginExternal
	cfg.TuneAgent = func(c *agent.Config) { c.HeartbeatInterval = 200 * time.Millisecond }
	n, err := node.Start(context.Background(), cfg, cp.Local())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Stop() })
	if err := n.WaitReady(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(n.Info().GPUs, "built-in GPU device plugin off") {
		t.Errorf("node's GPU message does not say the built-in plugin is off:\n%s", n.Info().GPUs)
	}
	// capacity, allocatable, and the GPUs healthy in the topology
	// annotation (the agent's UUIDs, healthy only when a plugin lists them).
	gpus := func() (capacity, allocatable int64, healthy int, why string) {
		o, err := cp.Local().Get(context.Background(), api.MustKindOf(&api.Node{}), "", "gpu-1")
		if err != nil {
			return -1, -1, -1, err.Error()
		}
		nd := o.(*api.Node)
		c, a := nd.Status.Capacity[api.ResourceNvidiaGPU], nd.Status.Allocatable[api.ResourceNvidiaGPU]
		ng, err := gputopology.ParseNodeGPUs(nd.Annotations[gputopology.AnnotationTopology])
		if err != nil {
			return -1, -1, -1, "topology annotation: " + err.Error()
		}
		return c.Value(), a.Value(), len(ng.Healthy), fmt.Sprintf("capacity %v allocatable %v, %d healthy in the topology annotation", nd.Status.Capacity, nd.Status.Allocatable, len(ng.Healthy))
	}
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		_, _, h, why := gpus()
		return h >= 0, why
	})
	if c, a, h, why := gpus(); c != 0 || a != 0 || h != 0 {
		t.Fatalf("before any plugin registers: %s; want no GPUs", why)
	}
	// The label skiff's DaemonSet selects.
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		o, err := cp.Local().Get(context.Background(), api.MustKindOf(&api.Node{}), "", "gpu-1")
		if err != nil {
			return false, err.Error()
		}
		l := o.(*api.Node).Labels
		return l[api.LabelSkiffDevicePlugin] == agent.DevicePluginExternal, fmt.Sprintf("labels %v", l)
	})

	src, _, err := gpu.Open("sim:dgxa100", gpu.Options{NodeName: "gpu-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	p, err := gpuplugin.New(gpuplugin.Config{Source: src, Dir: podworker.NodePath(dataDir, pluginapi.DevicePluginPath)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		c, a, h, why := gpus()
		return c == 8 && a == 8 && h == 8, why
	})

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("plugin: %v", err)
	}
	testwait.Until(t, 10*time.Second, func() (bool, string) {
		c, a, _, why := gpus()
		return c == 0 && a == 0, why
	})
}
