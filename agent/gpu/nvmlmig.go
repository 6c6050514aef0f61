package gpu

import (
	"context"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

var _ MIGSource = (*nvmlSource)(nil)

// MIGDevices reads the MIG devices of every MIG-enabled GPU from NVML, as
// NVIDIA's device plugin enumerates them: the GPU's MIG device handles,
// each with its UUID, memory, GPU and compute instance, attributes, and
// its GPU instance's placement. (The simulator answers with its own
// geometry, simmig.go.) A GPU that cannot say is skipped.
func (s *nvmlSource) MIGDevices(ctx context.Context) (map[int][]MIGDevice, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	out := map[int][]MIGDevice{}
	for i, h := range s.handles {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		cur, _, r := h.GetMigMode()
		if r != nvml.SUCCESS || cur != nvml.DEVICE_MIG_ENABLE {
			continue
		}
		n, r := h.GetMaxMigDeviceCount()
		if r != nvml.SUCCESS {
			continue
		}
		devs := []MIGDevice{}
		for j := range n {
			m, r := h.GetMigDeviceHandleByIndex(j)
			if r != nvml.SUCCESS {
				continue // no device at this index
			}
			devs = append(devs, readMIG(h, m, len(devs)))
		}
		out[i] = devs
	}
	return out, nil
}

func readMIG(parent, m nvml.Device, index int) MIGDevice {
	d := MIGDevice{Index: index}
	d.UUID, _ = m.GetUUID()
	if mem, r := m.GetMemoryInfo(); r == nvml.SUCCESS {
		d.MemoryMiB = mem.Total >> 20
	}
	d.GI, _ = m.GetGpuInstanceId()
	d.CI, _ = m.GetComputeInstanceId()
	if a, r := m.GetAttributes(); r == nvml.SUCCESS {
		d.SMs, d.Slices = int(a.MultiprocessorCount), int(a.GpuInstanceSliceCount)
		if d.MemoryMiB == 0 {
			d.MemoryMiB = a.MemorySizeMB
		}
	}
	if name, r := m.GetName(); r == nvml.SUCCESS {
		if _, p, ok := strings.Cut(name, "MIG "); ok {
			d.Profile = p // "NVIDIA A100-SXM4-40GB MIG 1g.5gb"
		}
	}
	if gi, r := parent.GetGpuInstanceById(d.GI); r == nvml.SUCCESS {
		if info, r := gi.GetInfo(); r == nvml.SUCCESS {
			d.Start, d.Size = int(info.Placement.Start), int(info.Placement.Size)
		}
	}
	return d
}
