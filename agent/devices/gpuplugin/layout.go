package gpuplugin

import (
	"fmt"
	"slices"
	"sort"

	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/api"
)

// Layout is what a node advertises under a config: every device, with the
// resource it goes under. Without sharing and MIG, every GPU whole as
// nvidia.com/gpu. migs holds the MIG devices of each MIG-enabled GPU (by
// GPU index); how they are advertised is flags.migStrategy's:
//
//   - none: GPUs are advertised whole, MIG or not (NVIDIA's plugin
//     ignores MIG then);
//   - single: every GPU must have MIG enabled with devices of one
//     profile; they are advertised as nvidia.com/gpu;
//   - mixed: MIG devices as nvidia.com/mig-<profile>, the other GPUs
//     whole as nvidia.com/gpu.
//
// Then each device of a resource listed under sharing becomes its
// replicas (<id>::<n>), advertised under the resource or its rename.
func Layout(pc *PluginConfig, devs []gpu.Device, migs map[int][]gpu.MIGDevice) ([]gpu.SubDevice, error) {
	if pc == nil {
		pc = DefaultConfig()
	}
	if pc.HAMi {
		return HAMiSlots(devs, pc.HAMiSettings), nil
	}
	var base []gpu.SubDevice
	switch pc.MigStrategy {
	case MigStrategySingle:
		profiles := map[string]bool{}
		for _, d := range devs {
			if len(migs[d.Index]) == 0 {
				return nil, fmt.Errorf("invalid MIG configuration: migStrategy single needs MIG enabled on every GPU, and GPU %d (%s) has none", d.Index, d.UUID)
			}
			for _, m := range migs[d.Index] {
				profiles[m.Profile] = true
				base = append(base, MIGSubDevice(d, m, ResourceName))
			}
		}
		if len(profiles) > 1 {
			return nil, fmt.Errorf("invalid MIG configuration: migStrategy single needs MIG devices of one profile, found %d", len(profiles))
		}
	case MigStrategyMixed:
		for _, d := range devs {
			if len(migs[d.Index]) == 0 {
				base = append(base, gpu.WholeGPUs([]gpu.Device{d}, ResourceName)...)
				continue
			}
			for _, m := range migs[d.Index] {
				base = append(base, MIGSubDevice(d, m, MIGResource(m.Profile)))
			}
		}
	default:
		base = gpu.WholeGPUs(devs, ResourceName)
	}
	r := pc.Replicated()
	if r == nil {
		return base, nil
	}
	sharing := pc.Sharing()
	var out []gpu.SubDevice
	for _, sd := range base {
		n, name := pc.ReplicasOf(sd.Resource)
		if n < 2 {
			out = append(out, sd)
			continue
		}
		for i := range n {
			rep := sd
			rep.ID = gpu.ReplicaID(sd.ID, i)
			rep.Sharing, rep.Resource, rep.Replica = sharing, name, i
			if sharing == gpu.SharingMPS {
				rep.MemoryMiB, rep.SMPercent = sd.MemoryMiB/uint64(n), sd.SMPercent/n
			}
			out = append(out, rep)
		}
	}
	return out, nil
}

// MIGResource is the mixed strategy's resource of a profile:
// nvidia.com/mig-1g.5gb.
func MIGResource(profile string) string { return "nvidia.com/mig-" + profile }

// MIGSubDevice is MIG device m of GPU d, advertised as resource.
func MIGSubDevice(d gpu.Device, m gpu.MIGDevice, resource string) gpu.SubDevice {
	mm := m
	return gpu.SubDevice{
		ID: m.UUID, Sharing: gpu.SharingMIG, Resource: resource,
		ParentIndex: d.Index, ParentUUID: d.UUID,
		Domain: m.UUID, DomainMiB: m.MemoryMiB, MemoryMiB: m.MemoryMiB, SMPercent: 100,
		MIG: &mm,
	}
}

// Resources lists the resources of a layout, sorted.
func Resources(layout []gpu.SubDevice) []string {
	var out []string
	for _, sd := range layout {
		if !slices.Contains(out, sd.Resource) {
			out = append(out, sd.Resource)
		}
	}
	sort.Strings(out)
	return out
}

// pickReplicas is NVIDIA's greedy allocation of replicas
// (internal/rm/allocate.go): the required ones, then one at a time the
// available replica of the GPU with the fewest allocated replicas
// (packed: the most), ties going to the GPU this request took fewest
// from, then to the lower GPU index and replica.
func pickReplicas(layout []gpu.SubDevice, available, required []string, size int, packed bool) []string {
	parent := map[string]int{}
	total := map[int]int{}
	for _, sd := range layout {
		parent[sd.ID] = sd.ParentIndex
		total[sd.ParentIndex]++
	}
	avail := map[int]int{}
	var cands []string
	for _, id := range available {
		if !slices.Contains(required, id) {
			cands = append(cands, id)
		}
		avail[parent[id]]++
	}
	byPos := map[string]int{}
	for i, sd := range layout {
		byPos[sd.ID] = i
	}
	sort.Slice(cands, func(a, b int) bool { return byPos[cands[a]] < byPos[cands[b]] })
	out := slices.Clone(required)
	picked := map[int]int{}
	for len(out) < size && len(cands) > 0 {
		sort.SliceStable(cands, func(a, b int) bool {
			pa, pb := parent[cands[a]], parent[cands[b]]
			ua, ub := total[pa]-avail[pa], total[pb]-avail[pb]
			if ua != ub {
				if packed {
					return ua > ub
				}
				return ua < ub
			}
			return picked[pa] < picked[pb]
		})
		id := cands[0]
		picked[parent[id]]++
		avail[parent[id]]--
		out = append(out, id)
		cands = cands[1:]
	}
	return out
}

// pickInOrder takes the required devices, then available ones in order.
func pickInOrder(available, required []string, size int) []string {
	out := slices.Clone(required)
	rest := slices.Clone(available)
	sort.Strings(rest)
	for _, id := range rest {
		if len(out) >= size {
			break
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// HAMiSlots is the layout of HAMi's device plugin: s.SplitCount slots of
// every GPU s does not filter under nvidia.com/gpu ("<uuid>::<n>", as HAMi's own
// fake device IDs, one per slice a GPU may be split into). Which GPU and
// how much of it a container gets is the scheduler's decision, not the
// slot the device manager picked: a slot only counts the slices.
func HAMiSlots(devs []gpu.Device, s api.HAMiNodeSettings) []gpu.SubDevice {
	out := make([]gpu.SubDevice, 0, len(devs)*s.SplitCount)
	for _, d := range devs {
		if s.Filtered(d.UUID, d.Index) {
			continue
		}
		for r := range s.SplitCount {
			out = append(out, gpu.SubDevice{
				ID: gpu.ReplicaID(d.UUID, r), Sharing: gpu.SharingSlice, Resource: ResourceName,
				ParentIndex: d.Index, ParentUUID: d.UUID, Replica: r,
				Domain: d.UUID, DomainMiB: d.MemoryMiB, MemoryMiB: d.MemoryMiB, SMPercent: 100,
			})
		}
	}
	return out
}
