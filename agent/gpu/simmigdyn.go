package gpu

import (
	"fmt"
	"slices"
	"strings"
)

// Dynamic MIG: single MIG devices created and destroyed one at a time, at
// a placement the caller chose, as NVIDIA's DRA driver does on a claim's
// prepare (its DynamicMIG feature): nvmlDeviceCreateGpuInstanceWithPlacement,
// then a compute instance over all of it. mig-parted's whole-GPU geometry
// (SetMIG) is the other way to make them.

// MIGPartitioner is a Source that can create and destroy single MIG
// devices (the simulator; skiff does not create MIG devices on real GPUs).
type MIGPartitioner interface {
	MIGConfigurer
	// CreateMIGDevice creates a MIG device of profile on GPU index at the
	// placement starting at memory slice start, turning MIG mode on when
	// it was off. It fails, changing nothing, when the profile or the
	// placement is not one the GPU offers or overlaps a device it has.
	// The same device created again (same profile and placement) is
	// returned as it is: a restarted agent re-creates what its checkpoint
	// holds.
	CreateMIGDevice(index int, profile string, start int) (MIGDevice, error)
	// DestroyMIGDevice destroys the MIG device uuid of GPU index; MIG mode
	// goes off with its last device. A device that is not there is done.
	DestroyMIGDevice(index int, uuid string) error
}

var _ MIGPartitioner = (*Sim)(nil)

// CreateMIGDevice implements MIGPartitioner.
func (s *Sim) CreateMIGDevice(index int, profile string, start int) (MIGDevice, error) {
	if s.isClosed() {
		return MIGDevice{}, ErrClosed
	}
	if index < 0 || index >= len(s.static) {
		return MIGDevice{}, fmt.Errorf("MIG on GPU %d: %w", index, ErrNoSuchGPU)
	}
	d := s.static[index]
	var p *MIGProfile
	profiles := s.MIGProfiles(index)
	if len(profiles) == 0 {
		return MIGDevice{}, fmt.Errorf("GPU %d (%s) does not support MIG", index, d.Name)
	}
	for i := range profiles {
		if profiles[i].Name == profile {
			p = &profiles[i]
		}
	}
	if p == nil {
		return MIGDevice{}, fmt.Errorf("GPU %d (%s) has no MIG profile %q", index, d.Name, profile)
	}
	size := -1
	for _, pl := range p.Placements {
		if int(pl.Start) == start {
			size = int(pl.Size)
		}
	}
	if size < 0 {
		return MIGDevice{}, fmt.Errorf("GPU %d (%s): MIG %s has no placement at memory slice %d", index, d.Name, profile, start)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.mig[index]
	gi, used := 1, map[int]bool{}
	for _, m := range cur {
		used[m.Index] = true
		if m.Profile == profile && m.Start == start {
			return m, nil
		}
		if m.Start < start+size && start < m.Start+m.Size {
			return MIGDevice{}, fmt.Errorf("GPU %d (%s): MIG %s at memory slices %d-%d overlaps MIG %s (%s) at %d-%d (Insufficient Resources)",
				index, d.Name, profile, start, start+size-1, m.Profile, m.UUID, m.Start, m.Start+m.Size-1)
		}
		gi = max(gi, m.GI+1)
	}
	m := MIGDevice{Profile: p.Name, Start: start, Size: size, Slices: p.Slices, MemoryMiB: p.MemoryMiB, SMs: p.SMs,
		GI: gi}
	for used[m.Index] {
		m.Index++ // the lowest free index, as NVML numbers MIG devices
	}
	m.UUID = migUUID(s.node, d.UUID, m)
	s.mig[index] = append(slices.Clone(cur), m)
	return m, nil
}

// DestroyMIGDevice implements MIGPartitioner.
func (s *Sim) DestroyMIGDevice(index int, uuid string) error {
	if s.isClosed() {
		return ErrClosed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.mig[index]
	if !ok {
		return nil
	}
	rest := slices.DeleteFunc(slices.Clone(cur), func(m MIGDevice) bool { return m.UUID == uuid })
	if len(rest) == 0 {
		delete(s.mig, index)
		return nil
	}
	s.mig[index] = rest
	return nil
}

// SMIID is the profile's GPU instance profile ID as nvidia-smi mig -lgip
// shows it (what NVML's profile info calls its id): 19 for 1g.5gb, 20
// for 1g.5gb+me, 14 for 2g.10gb, 0 for 7g.40gb (MIGProfileID).
func (p MIGProfile) SMIID() int {
	if strings.HasSuffix(p.Name, "+me") {
		return 20
	}
	mem := 0
	if len(p.Placements) > 0 {
		mem = int(p.Placements[0].Size)
	}
	return MIGProfileID(p.Slices, mem)
}
