package gpudriver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"tags.cncf.io/container-device-interface/specs-go"

	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/agent/gpu/cdi"
	"skiff.dev/skiff/api"
)

// Dynamic MIG: MIG devices as partitionable devices (KEP-4815), the way
// NVIDIA's k8s-dra-driver-gpu publishes them with its DynamicMIG feature
// gate. Each partitionable GPU gets a counter set gpu-MINOR-counter-set
// (sharedCounters, in the pool's counter slice): its capacities
// (multiprocessors, copy-engines, decoders, encoders, jpeg-engines,
// ofa-engines, memory: the largest any of its MIG profiles has) and one
// counter per memory slice (memory-slice-0 … memory-slice-7, value 1).
// Its devices, in a slice of their own: the whole GPU gpu-MINOR, which
// consumes the whole set, and one device per possible MIG placement,
// gpu-MINOR-mig-PROFILE-PROFILEID-START (gpu-0-mig-1g5gb-19-0), type
// mig, with the attributes profile and parentUUID (and the GPU's
// productName, brand, architecture, versions, PCI ids), the profile's
// capacities, consuming them and the memory slices of its placement.
// The Kubernetes allocator then never hands out two devices that
// overlap: not two placements sharing a memory slice, not the whole GPU
// next to any MIG device of it. Nothing exists on the GPU until a claim
// is prepared: Prepare creates the MIG device (gpu.MIGPartitioner) and
// gives the container a CDI device of its own for it; Unprepare destroys
// it. A GPU that has MIG devices made another way (mig-parted, the
// nvidia.com/mig.config label) is not partitionable: it stays whole, in
// the node's main slice.

// Names of the partitionable GPUs' counters and attributes, as NVIDIA's.
const (
	// MIGDeviceType is the type attribute of a MIG device (the class
	// mig.nvidia.com selects it).
	MIGDeviceType = "mig"
	// AttrProfile and AttrParentUUID are a MIG device's profile
	// ("1g.5gb") and its GPU's UUID.
	AttrProfile    = "profile"
	AttrParentUUID = "parentUUID"
)

// partition is one possible MIG placement of a GPU.
type partition struct {
	gpu     gpu.Device
	profile gpu.MIGProfile
	start   int
	size    int
}

// name is NVIDIA's canonical name of the placement:
// gpu-MINOR-mig-PROFILE-PROFILEID-START, the profile without dots and
// with anything but [a-z0-9] as '-' ("1g.5gb+me" → "1g5gb-me").
func (p partition) name() string {
	prof := strings.ToLower(strings.ReplaceAll(p.profile.Name, ".", ""))
	prof = strings.Trim(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, prof), "-")
	return fmt.Sprintf("%s-mig-%s-%d-%d", DeviceName(p.gpu), prof, p.profile.SMIID(), p.start)
}

// CounterSetName is the counter set of a partitionable GPU: gpu-MINOR-counter-set.
func CounterSetName(g gpu.Device) string { return DeviceName(g) + "-counter-set" }

// migCapacities are a profile's capacities, under NVIDIA's names.
func migCapacities(p gpu.MIGProfile) map[string]api.DeviceCapacity {
	n := func(v int) api.DeviceCapacity {
		return api.DeviceCapacity{Value: *resource.NewQuantity(int64(v), resource.DecimalSI)}
	}
	return map[string]api.DeviceCapacity{
		"multiprocessors": n(p.SMs),
		"copyEngines":     n(p.CopyEngines),
		"decoders":        n(p.Decoders),
		"encoders":        n(p.Encoders),
		"jpegEngines":     n(p.JPEGEngines),
		"ofaEngines":      n(p.OFAEngines),
		"memory":          {Value: *resource.NewQuantity(int64(p.MemoryMiB)<<20, resource.BinarySI)},
	}
}

// counterName turns a capacity name into its counter's (a DNS label):
// copyEngines → copy-engines.
func counterName(capacity string) string {
	var b strings.Builder
	for _, r := range capacity {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('-')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

func memorySliceCounter(i int) string { return "memory-slice-" + strconv.Itoa(i) }

// counters are the counters of capacities plus memory slices start..start+size-1.
func counters(caps map[string]api.DeviceCapacity, start, size int) map[string]api.Counter {
	out := make(map[string]api.Counter, len(caps)+size)
	for name, c := range caps {
		out[counterName(name)] = api.Counter(c)
	}
	for i := start; i < start+size; i++ {
		out[memorySliceCounter(i)] = api.Counter{Value: *resource.NewQuantity(1, resource.DecimalSI)}
	}
	return out
}

// partitioner is the Source's MIG partitioner (nil: none).
func (d *Driver) partitioner() gpu.MIGPartitioner {
	p, _ := d.cfg.Source.(gpu.MIGPartitioner)
	return p
}

// partitions lists the possible MIG placements of GPU g, smallest
// profile first, then by placement; nil when the GPU has no MIG.
func (d *Driver) partitions(g gpu.Device) []partition {
	mp := d.partitioner()
	if mp == nil {
		return nil
	}
	var out []partition
	for _, p := range mp.MIGProfiles(g.Index) {
		for _, pl := range p.Placements {
			out = append(out, partition{gpu: g, profile: p, start: int(pl.Start), size: int(pl.Size)})
		}
	}
	return out
}

// partitionable reports, by GPU index, the GPUs whose MIG devices this
// driver publishes as partitions: with DynamicMIG, every GPU with MIG
// profiles and no MIG device but the ones its claims hold.
func (d *Driver) partitionable(ctx context.Context, gpus []gpu.Device) (map[int]bool, error) {
	if !d.cfg.DynamicMIG || d.partitioner() == nil {
		return nil, nil
	}
	cur, err := d.partitioner().MIGDevices(ctx)
	if err != nil {
		return nil, fmt.Errorf("list MIG devices: %w", err)
	}
	own := d.MIGDeviceUUIDs()
	out := map[int]bool{}
	for _, g := range gpus {
		foreign := slices.ContainsFunc(cur[g.Index], func(m gpu.MIGDevice) bool { return !own[m.UUID] })
		if !foreign && len(d.partitioner().MIGProfiles(g.Index)) > 0 {
			out[g.Index] = true
		}
	}
	return out, nil
}

// partitionDevices are GPU g's devices as partitionable devices: whole
// (its device as Devices describes it, consuming the whole counter set)
// and one per placement; and its counter set.
func (d *Driver) partitionDevices(g gpu.Device, whole api.Device) ([]api.Device, api.CounterSet) {
	parts := d.partitions(g)
	maxCaps := map[string]api.DeviceCapacity{}
	slicesN := 0
	for _, p := range parts {
		for name, c := range migCapacities(p.profile) {
			if old, ok := maxCaps[name]; !ok || c.Value.Cmp(old.Value) > 0 {
				maxCaps[name] = c
			}
		}
		slicesN = max(slicesN, p.start+p.size)
	}
	set := api.CounterSet{Name: CounterSetName(g), Counters: counters(maxCaps, 0, slicesN)}
	whole.ConsumesCounters = []api.DeviceCounterConsumption{{CounterSet: set.Name, Counters: counters(maxCaps, 0, slicesN)}}
	out := []api.Device{whole}
	for _, p := range parts {
		attrs := map[string]api.DeviceAttribute{
			"type":         str(MIGDeviceType),
			AttrParentUUID: str(g.UUID),
			AttrProfile:    str(p.profile.Name),
		}
		for _, k := range []string{"productName", "brand", "architecture", "cudaComputeCapability", "driverVersion",
			"cudaDriverVersion", "addressingMode", AttrPCIBusID, AttrPCIeRoot} {
			if v, ok := whole.Attributes[k]; ok {
				attrs[k] = v
			}
		}
		caps := migCapacities(p.profile)
		out = append(out, api.Device{
			Name: p.name(), Attributes: attrs, Capacity: caps,
			ConsumesCounters: []api.DeviceCounterConsumption{{CounterSet: set.Name, Counters: counters(caps, p.start, p.size)}},
		})
	}
	return out, set
}

// namedSlice is one slice of the node's pool.
type namedSlice struct {
	name string
	spec api.ResourceSliceSpec
}

// poolSlices splits the devices of the node's slice (SliceDevices) into
// the pool's slices: the main one (SliceName: every GPU that is not
// partitionable, as without DynamicMIG), the counter sets
// (SliceName-counters, -counters-1, ...: at most 8 sets a slice, and
// Kubernetes wants them apart from devices) and one per partitionable GPU
// (SliceName-gpu-MINOR: at most 64 devices with counters a slice). Without
// partitionable GPUs it is the main one alone.
func (d *Driver) poolSlices(ctx context.Context, devs []api.Device) ([]namedSlice, error) {
	gpus, err := d.cfg.Source.Devices(ctx)
	if err != nil {
		return nil, fmt.Errorf("list GPUs: %w", err)
	}
	parted, err := d.partitionable(ctx, gpus)
	if err != nil {
		return nil, err
	}
	byName := map[string]gpu.Device{}
	for _, g := range gpus {
		byName[DeviceName(g)] = g
	}
	base := SliceName(d.cfg.NodeName)
	main := namedSlice{name: base, spec: api.ResourceSliceSpec{Devices: []api.Device{}}}
	var sets []api.CounterSet
	var perGPU []namedSlice
	for _, dev := range devs {
		g, ok := byName[dev.Name]
		if !ok || !parted[g.Index] {
			main.spec.Devices = append(main.spec.Devices, dev)
			continue
		}
		pdevs, set := d.partitionDevices(g, dev)
		sets = append(sets, set)
		perGPU = append(perGPU, namedSlice{name: base + "-" + dev.Name, spec: api.ResourceSliceSpec{Devices: pdevs}})
	}
	out := []namedSlice{main}
	for i := 0; i < len(sets); i += api.ResourceSliceMaxCounterSets {
		name := base + "-counters"
		if i > 0 {
			name += "-" + strconv.Itoa(i/api.ResourceSliceMaxCounterSets)
		}
		out = append(out, namedSlice{name: name, spec: api.ResourceSliceSpec{SharedCounters: sets[i:min(i+api.ResourceSliceMaxCounterSets, len(sets))]}})
	}
	return append(out, perGPU...), nil
}

// findPartition is the placement a device name of this pool names.
func (d *Driver) findPartition(name string, gpus []gpu.Device) (partition, bool) {
	for _, g := range gpus {
		if !strings.HasPrefix(name, DeviceName(g)+"-mig-") {
			continue
		}
		for _, p := range d.partitions(g) {
			if p.name() == name {
				return p, true
			}
		}
	}
	return partition{}, false
}

// migPlacement is a prepared MIG device's place on its GPU.
type migPlacement struct {
	GPU     int    `json:"gpu"` // the GPU's index
	Profile string `json:"profile"`
	Start   int    `json:"start"`
	Size    int    `json:"size"`
}

// gpuUUID is the physical GPU a prepared device takes (a part of).
func (p preparedDevice) gpuUUID() string {
	if p.Parent != "" {
		return p.Parent
	}
	return p.UUID
}

// overlaps reports whether two devices cannot be held at once: the same
// GPU, whole or in MIG devices sharing a memory slice.
func overlaps(a, b preparedDevice) bool {
	if a.gpuUUID() != b.gpuUUID() {
		return false
	}
	if a.MIG == nil || b.MIG == nil {
		return true
	}
	return a.MIG.Start < b.MIG.Start+b.MIG.Size && b.MIG.Start < a.MIG.Start+a.MIG.Size
}

// conflictLocked names the claim holding (or preparing) a device that
// dev overlaps.
func (d *Driver) conflictLocked(dev preparedDevice) (string, bool) {
	for _, c := range d.ck.Claims {
		for _, h := range c.Devices {
			if overlaps(dev, h) {
				return "claim " + c.Namespace + "/" + c.Name, true
			}
		}
	}
	for _, p := range d.pending {
		if overlaps(dev, p.dev) {
			return "claim " + p.claim, true
		}
	}
	return "", false
}

// migPrepared is a partition as a device of a claim being prepared (its
// UUID comes when createMIG made it).
func migPrepared(ref ClaimRef, request, pool string, p partition) preparedDevice {
	return preparedDevice{
		Requests: []string{request}, Pool: pool, Device: p.name(), Parent: p.gpu.UUID,
		MIG:          &migPlacement{GPU: p.gpu.Index, Profile: p.profile.Name, Start: p.start, Size: p.size},
		CDIDeviceIDs: []string{cdi.ClaimDeviceName(ref.UID, p.name())},
	}
}

// createMIG creates the claim's MIG devices (in devs, filling in their
// UUIDs) and returns each one's CDI edits by index in devs. On an error
// it destroys what it created.
func (d *Driver) createMIG(ctx context.Context, devs []preparedDevice) (map[int]*specs.ContainerEdits, error) {
	out := map[int]*specs.ContainerEdits{}
	var made []preparedDevice
	fail := func(err error) (map[int]*specs.ContainerEdits, error) {
		_ = d.destroyMIG(made)
		return nil, err
	}
	for i := range devs {
		dev := &devs[i]
		if dev.MIG == nil {
			continue
		}
		mp := d.partitioner()
		if mp == nil || d.cfg.SimCDI == nil || !d.cfg.DynamicMIG {
			return fail(fmt.Errorf("device %s: this node does not create MIG devices (dynamic MIG is off, or its GPUs are not simulated: skiff creates MIG devices on simulated GPUs only)", dev.Device))
		}
		m, err := mp.CreateMIGDevice(dev.MIG.GPU, dev.MIG.Profile, dev.MIG.Start)
		if err != nil {
			return fail(fmt.Errorf("error creating MIG device %s: %w", dev.Device, err))
		}
		dev.UUID = m.UUID
		made = append(made, *dev)
		edits, err := d.migEdits(ctx, dev.MIG.GPU, m)
		if err != nil {
			return fail(err)
		}
		out[i] = edits
	}
	return out, nil
}

// migEdits are the CDI edits of MIG device m of GPU index (simulated).
func (d *Driver) migEdits(ctx context.Context, index int, m gpu.MIGDevice) (*specs.ContainerEdits, error) {
	gpus, err := d.cfg.Source.Devices(ctx)
	if err != nil {
		return nil, fmt.Errorf("list GPUs: %w", err)
	}
	if index < 0 || index >= len(gpus) {
		return nil, fmt.Errorf("MIG device %s: %w", m.UUID, gpu.ErrNoSuchGPU)
	}
	topo, err := d.cfg.Source.Topology(ctx)
	if err != nil {
		return nil, fmt.Errorf("GPU topology: %w", err)
	}
	g := gpus[index]
	sd := gpu.SubDevice{ID: m.UUID, Sharing: gpu.SharingMIG, Resource: "nvidia.com/mig-" + m.Profile,
		ParentIndex: g.Index, ParentUUID: g.UUID, Domain: m.UUID, DomainMiB: m.MemoryMiB, MemoryMiB: m.MemoryMiB,
		SMPercent: 100, MIG: &m}
	edits, err := d.cfg.SimCDI.SimMIGEdits(g, sd, topo)
	if err != nil {
		return nil, err
	}
	return &edits, nil
}

// destroyMIG destroys the MIG devices of devs (those created).
func (d *Driver) destroyMIG(devs []preparedDevice) error {
	mp := d.partitioner()
	var errs []error
	for _, dev := range devs {
		if dev.MIG == nil || dev.UUID == "" || mp == nil {
			continue
		}
		if err := mp.DestroyMIGDevice(dev.MIG.GPU, dev.UUID); err != nil {
			errs = append(errs, fmt.Errorf("destroy MIG device %s (%s): %w", dev.Device, dev.UUID, err))
		}
	}
	return errors.Join(errs...)
}

// restoreMIG re-creates the MIG devices of the checkpoint's claims (a
// simulated GPU forgets them when the agent stops; the same profile and
// placement give the same UUID).
func (d *Driver) restoreMIG() {
	mp := d.partitioner()
	for _, uid := range slices.Sorted(maps.Keys(d.ck.Claims)) {
		c := d.ck.Claims[uid]
		for _, dev := range c.Devices {
			if dev.MIG == nil {
				continue
			}
			if mp == nil {
				d.log.Warn("a prepared claim holds a MIG device this node cannot create", "claim", c.Namespace+"/"+c.Name, "device", dev.Device)
				continue
			}
			m, err := mp.CreateMIGDevice(dev.MIG.GPU, dev.MIG.Profile, dev.MIG.Start)
			if err != nil || m.UUID != dev.UUID {
				d.log.Warn("re-create a prepared claim's MIG device", "claim", c.Namespace+"/"+c.Name, "device", dev.Device, "uuid", dev.UUID, "got", m.UUID, "err", err)
			}
		}
	}
}

// MIGDeviceUUIDs are the MIG devices the driver created for its claims
// (prepared or being prepared): the device plugin's MIG layout leaves
// them out (the GPU is a claim's, Held).
func (d *Driver) MIGDeviceUUIDs() map[string]bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]bool{}
	for _, c := range d.ck.Claims {
		for _, dev := range c.Devices {
			if dev.MIG != nil && dev.UUID != "" {
				out[dev.UUID] = true
			}
		}
	}
	for _, p := range d.pending {
		if p.dev.MIG != nil && p.dev.UUID != "" {
			out[p.dev.UUID] = true
		}
	}
	return out
}
