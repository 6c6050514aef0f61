package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"skiff.dev/skiff/agent"
	"skiff.dev/skiff/agent/devices"
	"skiff.dev/skiff/agent/devices/gpuplugin"
	"skiff.dev/skiff/agent/gpu"
)

// DevicePluginConfig is what `skiff device-plugin` runs: the built-in GPU
// device plugin as its own process, registering with a node's device
// manager the way NVIDIA's device plugin registers with a kubelet.
type DevicePluginConfig struct {
	// GPUs to advertise (agent/gpu.Open: auto, nvml, sim:NAME, ...).
	GPUs string
	// PluginDir is the device plugin directory, where the agent's
	// kubelet.sock is: the kubelet's /var/lib/kubelet/device-plugins by
	// default, as NVIDIA's plugin's, which is what a DaemonSet pod mounts
	// with a hostPath (the agent maps it to its DATA-DIR/device-plugins:
	// podworker.NodePath).
	PluginDir string
	// NodeName seeds simulated GPU UUIDs (must match the agent's; "" =
	// the hostname).
	NodeName string
	Log      *slog.Logger
	Out      io.Writer
}

// DefaultDevicePluginConfig returns the defaults of `skiff device-plugin`.
func DefaultDevicePluginConfig() DevicePluginConfig {
	return DevicePluginConfig{GPUs: "auto", PluginDir: filepath.Clean(pluginapi.DevicePluginPath)}
}

// DevicePlugin serves the plugin until ctx ends.
func DevicePlugin(ctx context.Context, d DevicePluginConfig) error {
	lg, out := d.Log, d.Out
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	if out == nil {
		out = io.Discard
	}
	node := d.NodeName
	if node == "" {
		node = agent.DefaultConfig().NodeName
	}
	src, msg, err := gpu.Open(d.GPUs, gpu.Options{NodeName: node, Logger: lg})
	if err != nil {
		return err
	}
	defer src.Close()
	fmt.Fprintln(out, msg)
	if devs, err := src.Devices(ctx); err != nil || len(devs) == 0 {
		return errors.New("no GPUs to advertise")
	}
	p, err := gpuplugin.New(gpuplugin.Config{Source: src, Dir: d.PluginDir, Log: lg})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "serving %s on %s; registering with %s\n", gpuplugin.ResourceName, p.SocketPath(), filepath.Join(d.PluginDir, devices.SocketName))
	return p.Run(ctx)
}
