package gpu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"skiff.dev/skiff/api/gputopology"
)

// NewNVML opens the real NVIDIA driver. libnvidia-ml.so.1 is loaded now,
// not when the binary starts, so a machine without a driver gets
// ErrNoDriver here instead of a crash. Health comes from NVML's Xid events,
// read by a goroutine that Close stops.
func NewNVML(log *slog.Logger) (Source, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s, err := openNVML(nvml.New(), nvmlConfig{
		name:     "nvml",
		host:     sysfsHost,
		log:      log,
		watchXid: true,
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// nvmlConfig says how to read one nvml.Interface: the real library or a
// go-nvml mock server (the simulator).
type nvmlConfig struct {
	name      string
	simulated bool
	// host answers what NVML does not: the NUMA node and the close CPUs of
	// a PCI device. The real source reads sysfs; the simulator its profile.
	host func(busID string) (numa int, cpus string)
	// memory, when set, replaces GetMemoryInfo (see Sim.memory).
	memory func(i int) (total, used uint64)
	log    *slog.Logger
	// watchXid starts the goroutine that waits for NVML Xid events.
	watchXid bool
}

// nvmlSource is a Source over any nvml.Interface.
type nvmlSource struct {
	cfg     nvmlConfig
	lib     nvml.Interface
	handles []nvml.Device
	static  []Device // what does not change: identity, model, place
	topo    *gputopology.Topology
	health  *healthHub

	mu     sync.Mutex
	closed bool
	stop   context.CancelFunc
	wg     sync.WaitGroup
}

var _ Source = (*nvmlSource)(nil)

// check turns an NVML return code into an error naming the operation.
func check(op string, r nvml.Return) error {
	if r == nvml.SUCCESS {
		return nil
	}
	return fmt.Errorf("nvml %s: %w", op, r)
}

// openNVML initialises lib and reads every GPU once.
func openNVML(lib nvml.Interface, cfg nvmlConfig) (*nvmlSource, error) {
	switch r := lib.Init(); r {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return nil, ErrNoDriver
	default:
		return nil, check("init", r)
	}
	s := &nvmlSource{cfg: cfg, lib: lib}
	if err := s.read(); err != nil {
		lib.Shutdown()
		return nil, err
	}
	s.health = newHealthHub(len(s.static))
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	if cfg.watchXid && len(s.handles) > 0 {
		s.wg.Go(func() { s.watchXid(ctx) })
	}
	return s, nil
}

// read queries the static facts of every GPU and the topology matrix.
func (s *nvmlSource) read() error {
	driver, r := s.lib.SystemGetDriverVersion()
	if err := check("get driver version", r); err != nil {
		return err
	}
	cudaInt, r := s.lib.SystemGetCudaDriverVersion()
	if err := check("get CUDA driver version", r); err != nil {
		return err
	}
	cuda := fmt.Sprintf("%d.%d", cudaInt/1000, cudaInt%1000/10) // 12040 → 12.4
	n, r := s.lib.DeviceGetCount()
	if err := check("get device count", r); err != nil {
		return err
	}
	for i := range n {
		h, r := s.lib.DeviceGetHandleByIndex(i)
		if err := check(fmt.Sprintf("get GPU %d", i), r); err != nil {
			return err
		}
		d, err := readDevice(h, i)
		if err != nil {
			return fmt.Errorf("read GPU %d: %w", i, err)
		}
		d.DriverVersion, d.CUDAVersion = driver, cuda
		if s.cfg.host != nil {
			d.NUMANode, d.CPUAffinity = s.cfg.host(d.PCIBusID)
		}
		s.handles = append(s.handles, h)
		s.static = append(s.static, d)
	}
	topo, err := readTopology(s.handles, s.static)
	if err != nil {
		return err
	}
	s.topo = topo
	return nil
}

// readDevice asks NVML what one GPU is.
func readDevice(h nvml.Device, index int) (Device, error) {
	d := Device{Index: index, NUMANode: -1, Healthy: true}
	var r nvml.Return
	if d.UUID, r = h.GetUUID(); r != nvml.SUCCESS {
		return d, check("get UUID", r)
	}
	if d.Name, r = h.GetName(); r != nvml.SUCCESS {
		return d, check("get name", r)
	}
	if d.MinorNumber, r = h.GetMinorNumber(); r != nvml.SUCCESS {
		return d, check("get minor number", r)
	}
	if d.ComputeMajor, d.ComputeMinor, r = h.GetCudaComputeCapability(); r != nvml.SUCCESS {
		return d, check("get compute capability", r)
	}
	d.Family = Family(d.ComputeMajor, d.ComputeMinor)
	pci, r := h.GetPciInfo()
	if r != nvml.SUCCESS {
		return d, check("get PCI info", r)
	}
	d.PCIBusID = cString(pci.BusId[:])
	mem, r := h.GetMemoryInfo()
	if r != nvml.SUCCESS {
		return d, check("get memory info", r)
	}
	d.MemoryMiB, d.FreeMiB = mem.Total>>20, mem.Free>>20
	return d, nil
}

// readTopology fills the link matrix: PCIe paths from
// GetTopologyCommonAncestor, NVLinks by walking each GPU's links.
//
// On NVSwitch systems (DGX) a GPU's links end at switches, not at other
// GPUs. Like nvidia-smi, we then count a GPU with k links into the switch
// fabric as having NVk to every other GPU in it (the smaller k of the two).
func readTopology(handles []nvml.Device, devs []Device) (*gputopology.Topology, error) {
	n := len(handles)
	t := gputopology.NewTopology(n)
	byBus := make(map[string]int, n)
	for i, d := range devs {
		byBus[strings.ToLower(d.PCIBusID)] = i
		t.NUMANodes[i], t.CPUAffinity[i] = d.NUMANode, d.CPUAffinity
	}
	direct := make([][]int, n)
	toSwitch := make([]int, n)
	for i, h := range handles {
		direct[i] = make([]int, n)
		for l := range nvml.NVLINK_MAX_LINKS {
			state, r := h.GetNvLinkState(l)
			if r != nvml.SUCCESS || state != nvml.FEATURE_ENABLED {
				continue // link absent (GPUs have fewer than the maximum) or down
			}
			remote, r := h.GetNvLinkRemotePciInfo(l)
			if r != nvml.SUCCESS {
				continue
			}
			peer, isGPU := byBus[strings.ToLower(cString(remote.BusId[:]))]
			kind, r := h.GetNvLinkRemoteDeviceType(l)
			switch {
			case r == nvml.SUCCESS && kind == nvml.NVLINK_DEVICE_TYPE_SWITCH:
				toSwitch[i]++
			case isGPU:
				direct[i][peer]++
			default:
				toSwitch[i]++ // old drivers cannot tell; not a GPU here: a switch
			}
		}
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			level, r := handles[i].GetTopologyCommonAncestor(handles[j])
			if r != nvml.SUCCESS {
				return nil, check(fmt.Sprintf("get topology of GPU %d and GPU %d", i, j), r)
			}
			links := direct[i][j]
			if toSwitch[i] > 0 && toSwitch[j] > 0 {
				links += min(toSwitch[i], toSwitch[j])
			}
			t.Set(i, j, gputopology.Link{NVLinks: links, PCIe: pathOf(level)})
		}
	}
	return t, nil
}

// pathOf maps NVML's topology level onto nvidia-smi's words.
func pathOf(level nvml.GpuTopologyLevel) gputopology.PCIePath {
	switch level {
	case nvml.TOPOLOGY_INTERNAL, nvml.TOPOLOGY_SINGLE:
		return gputopology.PIX
	case nvml.TOPOLOGY_MULTIPLE:
		return gputopology.PXB
	case nvml.TOPOLOGY_HOSTBRIDGE:
		return gputopology.PHB
	case nvml.TOPOLOGY_NODE:
		return gputopology.NODE
	case nvml.TOPOLOGY_SYSTEM:
		return gputopology.SYS
	}
	return gputopology.PathUnknown
}

// Family names the architecture of a compute capability the way GPU
// feature discovery labels nvidia.com/gpu.family.
func Family(major, minor int) string {
	switch {
	case major == 3:
		return "kepler"
	case major == 5:
		return "maxwell"
	case major == 6:
		return "pascal"
	case major == 7 && minor < 5:
		return "volta"
	case major == 7:
		return "turing"
	case major == 8 && minor < 9:
		return "ampere"
	case major == 8:
		return "ada-lovelace"
	case major == 9:
		return "hopper"
	case major == 10 || major == 12:
		return "blackwell"
	}
	return "undefined"
}

// cString reads a NUL-terminated C string out of an NVML struct field.
func cString(b []int8) string {
	var s strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		s.WriteByte(byte(c))
	}
	return s.String()
}

// sysfsHost reads the NUMA node and close CPUs of a PCI device from
// /sys/bus/pci/devices. NVML writes bus ids with an 8-digit domain
// ("00000000:07:00.0"); sysfs with 4 ("0000:07:00.0").
func sysfsHost(busID string) (int, string) {
	dir := filepath.Join("/sys/bus/pci/devices", SysfsBusID(busID))
	numa := -1
	if b, err := os.ReadFile(filepath.Join(dir, "numa_node")); err == nil {
		if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			numa = v
		}
	}
	cpus := ""
	if b, err := os.ReadFile(filepath.Join(dir, "local_cpulist")); err == nil {
		cpus = strings.TrimSpace(string(b))
	}
	return numa, cpus
}

// SysfsBusID turns NVML's "00000000:07:00.0" into sysfs's "0000:07:00.0".
func SysfsBusID(busID string) string {
	domain, rest, ok := strings.Cut(strings.ToLower(busID), ":")
	if !ok {
		return strings.ToLower(busID)
	}
	v, err := strconv.ParseUint(domain, 16, 32)
	if err != nil {
		return strings.ToLower(busID)
	}
	return fmt.Sprintf("%04x:%s", v, rest)
}

func (s *nvmlSource) Name() string    { return s.cfg.name }
func (s *nvmlSource) Simulated() bool { return s.cfg.simulated }

func (s *nvmlSource) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Devices copies the static facts and adds current memory use and health.
func (s *nvmlSource) Devices(ctx context.Context) ([]Device, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	out := make([]Device, len(s.static))
	for i, d := range s.static {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if s.cfg.memory != nil {
			total, used := s.cfg.memory(i)
			d.MemoryMiB, d.FreeMiB = total, total-min(used, total)
		} else if mem, r := s.handles[i].GetMemoryInfo(); r == nvml.SUCCESS {
			d.MemoryMiB, d.FreeMiB = mem.Total>>20, mem.Free>>20
		}
		d.Healthy, d.LastXid = s.health.state(i)
		out[i] = d
	}
	return out, nil
}

// Topology returns a copy of the matrix read at open (it does not change
// while the machine runs).
func (s *nvmlSource) Topology(ctx context.Context) (*gputopology.Topology, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	all := make([]int, s.topo.N())
	for i := range all {
		all[i] = i
	}
	return s.topo.Restrict(all), nil
}

func (s *nvmlSource) Watch(ctx context.Context) <-chan HealthEvent {
	return s.health.watch(ctx)
}

// Close stops the event goroutine, waits for it, closes the watchers and
// shuts NVML down. Safe to call twice.
func (s *nvmlSource) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.stop()
	s.wg.Wait()
	s.health.close()
	return check("shutdown", s.lib.Shutdown())
}

// xidWaitMillis bounds one wait for an NVML event, and so how long Close
// waits for the event goroutine.
const xidWaitMillis = 500

// watchXid waits for Xid critical-error events until ctx ends, and records
// each in the health hub. It is the loop of NVIDIA's device plugin
// (checkHealth), with two differences: it stops through ctx, and a GPU can
// become healthy again (through the simulator's Clear, or a restart).
func (s *nvmlSource) watchXid(ctx context.Context) {
	log := s.cfg.log
	set, r := s.lib.EventSetCreate()
	if r != nvml.SUCCESS {
		log.Warn("GPU health events unavailable", "err", check("create event set", r))
		return
	}
	defer set.Free()
	for i, h := range s.handles {
		supported, r := h.GetSupportedEventTypes()
		if r != nvml.SUCCESS {
			log.Warn("GPU health events unsupported", "gpu", i, "err", check("get supported events", r))
			continue
		}
		mask := uint64(nvml.EventTypeXidCriticalError) & supported
		if mask == 0 {
			continue
		}
		if r := h.RegisterEvents(mask, set); r != nvml.SUCCESS {
			log.Warn("GPU health events unsupported", "gpu", i, "err", check("register events", r))
		}
	}
	for ctx.Err() == nil {
		ev, r := set.Wait(xidWaitMillis)
		if r == nvml.ERROR_TIMEOUT {
			continue
		}
		if r != nvml.SUCCESS {
			if errors.Is(r, nvml.ERROR_GPU_IS_LOST) {
				log.Error("a GPU is lost; marking all GPUs unhealthy")
				for i, d := range s.static {
					s.health.record(HealthEvent{Index: i, UUID: d.UUID, Reason: "GPU is lost"})
				}
			}
			continue
		}
		if ev.EventType != nvml.EventTypeXidCriticalError {
			continue
		}
		s.recordXid(ev)
	}
}

// recordXid finds the GPU of an event and records it.
func (s *nvmlSource) recordXid(ev nvml.EventData) {
	xid := ev.EventData
	uuid := ""
	if ev.Device != nil {
		uuid, _ = ev.Device.GetUUID()
	}
	for i, d := range s.static {
		if uuid != "" && d.UUID != uuid {
			continue // an event without a device concerns them all
		}
		healthy, _ := s.health.state(i)
		ev := HealthEvent{Index: i, UUID: d.UUID, Xid: xid,
			Healthy: healthy && !IsCriticalXid(xid),
			Reason:  fmt.Sprintf("Xid %d: %s", xid, XidReason(xid))}
		s.health.record(ev)
		s.cfg.log.Warn("GPU Xid error", "gpu", i, "uuid", d.UUID, "xid", xid, "healthy", ev.Healthy)
	}
}
