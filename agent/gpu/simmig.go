package gpu

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// MIG on simulated GPUs. go-nvml's mock GPUs carry NVIDIA's MIG profile
// tables (slices, memory, multiprocessors, instance counts) and possible
// placements for the A100, H100, H200 and B200, but their
// CreateGpuInstance places anything anywhere; the simulator keeps the
// geometry itself: a profile's instance goes to the first of its possible
// placements whose memory slices are free, or does not fit.

// placements are the possible placements of a profile, in memory slices
// of 8, as NVIDIA documents them for the A100 and H100 (and its
// successors, which keep the layout): go-nvml's mock tables have the A100's
// right but simplify the others', so the simulator uses these for all.
func placements(id, slices int) []nvml.GpuInstancePlacement {
	run := func(size uint32, starts ...uint32) []nvml.GpuInstancePlacement {
		var out []nvml.GpuInstancePlacement
		for _, s := range starts {
			out = append(out, nvml.GpuInstancePlacement{Start: s, Size: size})
		}
		return out
	}
	switch {
	case id == nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2: // 1g.10gb on 40GB: twice the memory
		return run(2, 0, 2, 4, 6)
	case slices == 1:
		return run(1, 0, 1, 2, 3, 4, 5, 6)
	case slices == 2:
		return run(2, 0, 2, 4)
	case slices == 3:
		return run(4, 0, 4)
	case slices == 4:
		return run(4, 0)
	case slices == 7:
		return run(8, 0)
	}
	return nil
}

// MIGProfile is one GPU instance profile a GPU offers.
type MIGProfile struct {
	// Name as nvidia-smi spells it: "1g.5gb", "1g.5gb+me", "7g.40gb".
	Name string
	// ID is NVML's profile id (GPU_INSTANCE_PROFILE_*).
	ID int
	// Slices are compute slices; MemoryMiB the instance's memory; SMs
	// its multiprocessors; Instances how many fit on an empty GPU.
	Slices, SMs, Instances int
	MemoryMiB              uint64
	// CopyEngines, Decoders, Encoders, JPEGEngines and OFAEngines are
	// the instance's engines, as NVML's profile info counts them.
	CopyEngines, Decoders, Encoders, JPEGEngines, OFAEngines int
	// Placements are the possible {Start, Size} in memory slices.
	Placements []nvml.GpuInstancePlacement
}

// MIGRequest asks for Count devices of a profile.
type MIGRequest struct {
	Profile string
	Count   int
}

// MIGConfigurer is a Source whose MIG geometry skiff can change (the
// simulator): what mig-parted does on a real GPU.
type MIGConfigurer interface {
	MIGSource
	// MIGProfiles lists the profiles GPU index offers; nil when it has
	// no MIG.
	MIGProfiles(index int) []MIGProfile
	// PCIDeviceID is GPU index's PCI device id (0x20B010DE), what
	// mig-parted's device-filter matches.
	PCIDeviceID(index int) uint32
	// SetMIG enables MIG on GPU index with exactly the devices asked
	// (nil: enabled, none), or disables it (enabled false). All or
	// nothing: a request that does not fit changes nothing.
	SetMIG(index int, enabled bool, reqs []MIGRequest) error
}

var (
	_ MIGConfigurer = (*Sim)(nil)
)

func (s *Sim) mockDevice(index int) (*server.Device, bool) {
	if index < 0 || index >= len(s.srv.Devices) {
		return nil, false
	}
	d, ok := s.srv.Devices[index].(*server.Device)
	return d, ok
}

// MIGProfiles lists the profiles of GPU index, smallest first.
func (s *Sim) MIGProfiles(index int) []MIGProfile {
	d, ok := s.mockDevice(index)
	if !ok {
		return nil
	}
	cfg := d.Config.MIGProfiles
	var out []MIGProfile
	boardGB := d.Config.MemoryMB / 1024 // the mocks' "MB" are MiB: 40, 80, 141, 180
	for id, info := range cfg.GpuInstanceProfiles {
		pls := placements(id, int(info.SliceCount))
		if pls == nil {
			continue
		}
		// NVIDIA names a profile by its share of the board's memory, in
		// eighths (memory slices), rounded: 1g.5gb, 3g.71gb of 141GB.
		name := fmt.Sprintf("%dg.%dgb", info.SliceCount, (boardGB*uint64(pls[0].Size)+4)/8)
		if id == nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1 {
			name += "+me"
		}
		out = append(out, MIGProfile{Name: name, ID: id, Slices: int(info.SliceCount), SMs: int(info.MultiprocessorCount),
			Instances: int(info.InstanceCount), MemoryMiB: info.MemorySizeMB, Placements: pls,
			CopyEngines: int(info.CopyEngineCount), Decoders: int(info.DecoderCount), Encoders: int(info.EncoderCount),
			JPEGEngines: int(info.JpegCount), OFAEngines: int(info.OfaCount)})
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].MemoryMiB != out[b].MemoryMiB {
			return out[a].MemoryMiB < out[b].MemoryMiB
		}
		return out[a].Name < out[b].Name
	})
	return out
}

// PCIDeviceID is the mock's PCI device id of GPU index.
func (s *Sim) PCIDeviceID(index int) uint32 {
	if d, ok := s.mockDevice(index); ok {
		return d.Config.PciDeviceId
	}
	return 0
}

// SetMIG places the devices asked on GPU index (see MIGConfigurer):
// largest first, each at the first free possible placement.
func (s *Sim) SetMIG(index int, enabled bool, reqs []MIGRequest) error {
	if s.isClosed() {
		return ErrClosed
	}
	if index < 0 || index >= len(s.static) {
		return fmt.Errorf("MIG on GPU %d: %w", index, ErrNoSuchGPU)
	}
	d := s.static[index]
	profiles := s.MIGProfiles(index)
	if enabled && len(profiles) == 0 {
		return fmt.Errorf("GPU %d (%s) does not support MIG", index, d.Name)
	}
	byName := map[string]MIGProfile{}
	for _, p := range profiles {
		byName[p.Name] = p
	}
	var want []MIGProfile
	for _, r := range reqs {
		p, ok := byName[r.Profile]
		if !ok {
			var names []string
			for _, p := range profiles {
				names = append(names, p.Name)
			}
			return fmt.Errorf("GPU %d (%s) has no MIG profile %q (it has %s)", index, d.Name, r.Profile, strings.Join(names, ", "))
		}
		if r.Count < 0 || r.Count > p.Instances {
			return fmt.Errorf("GPU %d (%s): %d MIG %s asked, at most %d fit", index, d.Name, r.Count, r.Profile, p.Instances)
		}
		for range r.Count {
			want = append(want, p)
		}
	}
	sort.SliceStable(want, func(a, b int) bool { return want[a].Placements[0].Size > want[b].Placements[0].Size })
	var used [8]bool
	pls, ok := place(want, used[:])
	if !ok {
		return fmt.Errorf("GPU %d (%s): the MIG devices asked do not fit (%s)", index, d.Name, describeRequests(reqs))
	}
	var devs []MIGDevice
	for i, p := range want {
		devs = append(devs, MIGDevice{Profile: p.Name, Start: int(pls[i].Start), Size: int(pls[i].Size),
			Slices: p.Slices, MemoryMiB: p.MemoryMiB, SMs: p.SMs, CI: 0})
	}
	sort.Slice(devs, func(a, b int) bool { return devs[a].Start < devs[b].Start })
	for i := range devs {
		devs[i].Index, devs[i].GI = i, i+1
		devs[i].UUID = migUUID(s.node, d.UUID, devs[i])
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !enabled {
		delete(s.mig, index)
		return nil
	}
	s.mig[index] = devs
	return nil
}

// place finds a placement for every profile of want (largest first) over
// the free memory slices, trying each possible placement in order and
// backing up when the rest does not fit (as a GPU's real placements
// allow: 3g.20gb at 4 leaves room for 2g.10gb and two 1g.5gb).
func place(want []MIGProfile, used []bool) ([]nvml.GpuInstancePlacement, bool) {
	if len(want) == 0 {
		return nil, true
	}
	for _, pl := range want[0].Placements {
		if !free(pl, used) {
			continue
		}
		mark(pl, used, true)
		rest, ok := place(want[1:], used)
		mark(pl, used, false)
		if ok {
			return append([]nvml.GpuInstancePlacement{pl}, rest...), true
		}
	}
	return nil, false
}

func free(pl nvml.GpuInstancePlacement, used []bool) bool {
	for i := pl.Start; i < pl.Start+pl.Size; i++ {
		if i >= uint32(len(used)) || used[i] {
			return false
		}
	}
	return true
}

func mark(pl nvml.GpuInstancePlacement, used []bool, v bool) {
	for i := pl.Start; i < pl.Start+pl.Size && i < uint32(len(used)); i++ {
		used[i] = v
	}
}

func describeRequests(reqs []MIGRequest) string {
	var parts []string
	for _, r := range reqs {
		parts = append(parts, fmt.Sprintf("%s: %d", r.Profile, r.Count))
	}
	return strings.Join(parts, ", ")
}

// migUUID is stable for one device of one GPU of one node: the same
// geometry applied again (an agent restart) gives the same UUIDs.
func migUUID(node, gpuUUID string, m MIGDevice) string {
	h := sha256.Sum256(fmt.Appendf(nil, "skiff-sim-mig/%s/%s/%s/%d", node, gpuUUID, m.Profile, m.Start))
	return fmt.Sprintf("MIG-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// MIGDevices lists the MIG devices of every MIG-enabled GPU.
func (s *Sim) MIGDevices(context.Context) (map[int][]MIGDevice, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int][]MIGDevice, len(s.mig))
	for i, devs := range s.mig {
		out[i] = slices.Clone(devs)
	}
	return out, nil
}
