package cdi

import (
	"fmt"
	"os"
	"path/filepath"

	"tags.cncf.io/container-device-interface/specs-go"

	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/agent/gpu/usage"
	"skiff.dev/skiff/api/gputopology"
)

// SimMIGEdits are the container edits of one MIG device of a simulated
// GPU that the DRA driver created for a claim (dynamic MIG), for the
// claim's own CDI device (ClaimDevice.Sim): what the node's simulated
// spec gives every GPU container (the control nodes, nvidia-smi,
// gpu-load), the GPU's device node, the MIG device's record (so the
// simulated nvidia-smi -L shows exactly that MIG device under its GPU)
// and its memory domain's load directory. It writes the record and makes
// the directory; the node's spec (WriteSimSpec) must have been written.
func (cfg Config) SimMIGEdits(d gpu.Device, sd gpu.SubDevice, topo *gputopology.Topology) (specs.ContainerEdits, error) {
	if sd.MIG == nil {
		return specs.ContainerEdits{}, fmt.Errorf("CDI edits of %s: not a MIG device", sd.ID)
	}
	recDir := filepath.Join(cfg.nodeDir(), "devices")
	if err := os.MkdirAll(recDir, 0o755); err != nil {
		return specs.ContainerEdits{}, fmt.Errorf("CDI edits of MIG device %s: %w", sd.ID, err)
	}
	if err := usage.PrepareDirs(cfg.LoadRoot(), []gpu.SubDevice{sd}); err != nil {
		return specs.ContainerEdits{}, fmt.Errorf("CDI edits of MIG device %s: %w", sd.ID, err)
	}
	dev, err := cfg.deviceEdits(recDir, d, sd, topo)
	if err != nil {
		return specs.ContainerEdits{}, err
	}
	out := cfg.commonEdits()
	out.DeviceNodes = append(out.DeviceNodes, dev.DeviceNodes...)
	out.Mounts = append(out.Mounts, dev.Mounts...)
	return out, nil
}
