package gpuplugin

import (
	"strconv"
	"strings"

	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/api"
)

// Labels are GPU feature discovery's labels of a node under a config
// (internal/lm of NVIDIA/k8s-device-plugin): gpu.Labels' model labels,
// then per resource of the layout its product, count, replicas and
// sharing-strategy (keys <resource>.<suffix>, the resource as the config
// names it, before a rename), nvidia.com/mps.capable, mig.capable and
// mig.strategy. The product gets -SHARED when the resource is shared and
// not renamed, and -MIG-<profile> for MIG devices advertised as
// nvidia.com/gpu (the single strategy).
func Labels(pc *PluginConfig, devs []gpu.Device, layout []gpu.SubDevice, simulated bool) map[string]string {
	l := gpu.Labels(devs, simulated)
	if len(devs) == 0 {
		return l
	}
	if pc == nil {
		pc = DefaultConfig()
	}
	if layout == nil {
		layout = gpu.WholeGPUs(devs, ResourceName)
	}
	// Group the devices by the resource the config names (before rename).
	type group struct {
		count   int // devices before replication
		product string
		mig     *gpu.MIGDevice
	}
	groups := map[string]*group{}
	var order []string
	for _, sd := range layout {
		base := baseResource(pc, sd)
		g := groups[base]
		if g == nil {
			g = &group{product: gpu.ProductLabel(devs[sd.ParentIndex].Name), mig: sd.MIG}
			groups[base] = g
			order = append(order, base)
		}
		if sd.Replica == 0 {
			g.count++
		}
	}
	delete(l, gpu.LabelProduct)
	delete(l, gpu.LabelCount)
	for _, res := range order {
		g := groups[res]
		n, name := pc.ReplicasOf(res)
		product := g.product
		if g.mig != nil {
			product += "-MIG-" + g.mig.Profile
		}
		strategy := gpu.SharingNone
		if n > 1 {
			strategy = pc.Sharing()
			if name == res {
				product += "-SHARED"
			}
		}
		l[res+".product"] = product
		l[res+".count"] = strconv.Itoa(g.count)
		l[res+".replicas"] = strconv.Itoa(n)
		l[res+".sharing-strategy"] = string(strategy)
		if g.mig != nil {
			l[res+".memory"] = strconv.FormatUint(g.mig.MemoryMiB, 10)
			l[res+".multiprocessors"] = strconv.Itoa(g.mig.SMs)
			l[res+".slices.gi"] = strconv.Itoa(g.mig.Slices)
			l[res+".slices.ci"] = strconv.Itoa(g.mig.Slices)
		}
	}
	l[api.LabelMPSCapable] = strconv.FormatBool(pc.Sharing() == gpu.SharingMPS && devs[0].ComputeMajor >= 7)
	l[api.LabelMIGCapable] = strconv.FormatBool(MIGCapable(devs[0].Name))
	if pc.MigStrategy != MigStrategyNone {
		l[api.LabelMIGStrategy] = pc.MigStrategy
	}
	return l
}

// baseResource is the resource a device is under before a rename.
func baseResource(pc *PluginConfig, sd gpu.SubDevice) string {
	if r := pc.Replicated(); r != nil {
		for _, rr := range r.Resources {
			if rr.Rename != "" && rr.Rename == sd.Resource {
				return rr.Name
			}
		}
	}
	return sd.Resource
}

// MIGCapable reports whether a GPU model supports MIG (A30, A100, H100,
// H200, B200 and their kin).
func MIGCapable(name string) bool {
	for _, m := range []string{"A100", "A30", "H100", "H200", "H20", "B200", "GB200"} {
		if strings.Contains(name, m) {
			return true
		}
	}
	return false
}

// OwnedLabel reports whether the agent owns a node label key: GFD's and
// the MIG manager's state, which it sets and removes as the GPUs change.
// The labels a user sets to ask for something (nvidia.com/mig.config,
// nvidia.com/device-plugin.config) and the cluster's (nvidia.com/gpu.clique,
// nvidia.com/gpu.deploy.*) are not its.
func OwnedLabel(key string) bool {
	switch {
	case key == api.LabelMIGConfig || key == api.LabelDevicePluginConfig,
		key == "nvidia.com/gpu.clique", strings.HasPrefix(key, "nvidia.com/gpu.deploy."):
		return false
	case strings.HasPrefix(key, "nvidia.com/gpu."), strings.HasPrefix(key, "nvidia.com/mig-"),
		strings.HasPrefix(key, "nvidia.com/mps."), strings.HasPrefix(key, "nvidia.com/cuda."),
		strings.HasPrefix(key, "nvidia.com/mig."), key == gpu.LabelSimulated:
		return true
	}
	return false
}
