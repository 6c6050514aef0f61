package gpu

import (
	"crypto/sha256"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"skiff.dev/skiff/api/gputopology"
)

// Sim is a simulated GPU server. It is a go-nvml mock server (the same
// nvml.Interface the real driver implements) with the gaps of the mocks
// filled in from a Profile:
//
//   - names: the mock A100 is called "Mock NVIDIA A100-SXM4-40GB"; the prefix
//     is removed so labels and node affinity read like a real cluster
//     (skiff.dev/gpu.simulated=true says the truth instead);
//   - PCI bus ids: the mock's GetPciInfo leaves them empty;
//   - topology: the mock's GetTopologyCommonAncestor and NVLink calls have no
//     function and would panic; here they answer from the profile;
//   - memory: the mock reports 0 free; here free = total - used;
//   - UUIDs: random in the mock, here derived from node, profile and index
//     so they survive an agent restart;
//   - health: faults injected with InjectXid, repaired with Clear.
//
// The devices and topology are then read by the same code that reads a
// real driver (nvml.go), so the simulator exercises the real path.
type Sim struct {
	*nvmlSource
	profile *Profile
	srv     *server.Server
	node    string

	mu      sync.Mutex
	usedMiB []uint64
	total   []uint64
	mig     map[int][]MIGDevice // MIG devices of MIG-enabled GPUs (simmig.go)
}

var (
	_ Source        = (*Sim)(nil)
	_ FaultInjector = (*Sim)(nil)
)

// NewSim builds a simulated server from a profile. node seeds the UUIDs:
// two nodes with the same profile get different GPUs, and one node gets the
// same GPUs every time.
func NewSim(p *Profile, node string, log *slog.Logger) (*Sim, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("GPU profile %s: %w", p.Name, err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	srv, err := mockServer(p)
	if err != nil {
		return nil, err
	}
	s := &Sim{profile: p, srv: srv, node: node, usedMiB: make([]uint64, len(srv.Devices)), mig: map[int][]MIGDevice{}}
	for _, nd := range srv.Devices {
		d := nd.(*server.Device)
		s.total = append(s.total, d.Config.MemoryMB) // the mocks' "MB" are MiB
		fillGaps(p, d, node)
	}
	src, err := openNVML(srv, nvmlConfig{
		name:      "sim:" + p.Name,
		simulated: true,
		host:      func(busID string) (int, string) { return p.numa(indexOfBus(srv, busID)) },
		memory:    s.memory,
		log:       log,
	})
	if err != nil {
		return nil, fmt.Errorf("simulated GPUs %s: %w", p.Name, err)
	}
	s.nvmlSource = src
	return s, nil
}

// mockServer returns go-nvml's mock for p.Mock, or a mock server of p.GPUs
// copies of p.Model.
func mockServer(p *Profile) (*server.Server, error) {
	switch p.Mock {
	case "dgxa100":
		return dgxa100.New(), nil
	case "dgxa100-80gb":
		return dgxa100.NewWithGPUs(gpus.Multiple(8, gpus.A100_SXM4_80GB)...), nil
	case "dgxh100":
		return dgxh100.New(), nil
	case "dgxh200":
		return dgxh200.New(), nil
	case "dgxb200":
		return dgxb200.New(), nil
	}
	major, minor, _ := parseCapability(p.Model.ComputeCapability)
	cudaMajor, cudaMinor, _ := parseCapability(p.CUDAVersion)
	cfg := gpus.Config{
		Name:      p.Model.Name,
		Brand:     nvml.BRAND_NVIDIA,
		MemoryMB:  p.Model.MemoryMiB,
		CudaMajor: major,
		CudaMinor: minor,
	}
	return server.NewServerWithGPUs(p.DriverVersion, "12."+p.DriverVersion,
		cudaMajor*1000+cudaMinor*10, gpus.Multiple(p.GPUs, cfg)...), nil
}

// fillGaps installs the answers the mock device lacks (see Sim).
func fillGaps(p *Profile, d *server.Device, node string) {
	i := d.Index
	d.Config.Name = strings.TrimPrefix(d.Config.Name, "Mock ")
	d.UUID = stableUUID(node, p.Name, i)
	d.PciBusID = p.busID(i)
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		info := nvml.PciInfo{PciDeviceId: d.Config.PciDeviceId}
		putCString(info.BusId[:], d.PciBusID)
		putCString(info.BusIdLegacy[:], SysfsBusID(d.PciBusID))
		return info, nvml.SUCCESS
	}
	d.GetTopologyCommonAncestorFunc = func(other nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
		o, ok := other.(*server.Device)
		if !ok {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return levelOf(p.pciePath(i, o.Index)), nvml.SUCCESS
	}
	// The NVLinks of GPU i, in order: direct bridges, then links into the
	// NVSwitch fabric (remote bus ids in PCI domain 1, where no GPU lives).
	type link struct {
		remoteBus string
		toSwitch  bool
	}
	var links []link
	for _, b := range p.NVLinks {
		peer := -1
		switch i {
		case b.GPUs[0]:
			peer = b.GPUs[1]
		case b.GPUs[1]:
			peer = b.GPUs[0]
		}
		for range b.Count {
			if peer >= 0 {
				links = append(links, link{remoteBus: p.busID(peer)})
			}
		}
	}
	for l := range p.NVSwitchLinks {
		links = append(links, link{remoteBus: fmt.Sprintf("00000001:%02X:00.0", l), toSwitch: true})
	}
	d.GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
		if l < 0 || l >= len(links) {
			return nvml.FEATURE_DISABLED, nvml.ERROR_INVALID_ARGUMENT
		}
		return nvml.FEATURE_ENABLED, nvml.SUCCESS
	}
	d.GetNvLinkRemotePciInfoFunc = func(l int) (nvml.PciInfo, nvml.Return) {
		if l < 0 || l >= len(links) {
			return nvml.PciInfo{}, nvml.ERROR_INVALID_ARGUMENT
		}
		var info nvml.PciInfo
		putCString(info.BusId[:], links[l].remoteBus)
		return info, nvml.SUCCESS
	}
	d.GetNvLinkRemoteDeviceTypeFunc = func(l int) (nvml.IntNvLinkDeviceType, nvml.Return) {
		if l < 0 || l >= len(links) {
			return nvml.NVLINK_DEVICE_TYPE_UNKNOWN, nvml.ERROR_INVALID_ARGUMENT
		}
		if links[l].toSwitch {
			return nvml.NVLINK_DEVICE_TYPE_SWITCH, nvml.SUCCESS
		}
		return nvml.NVLINK_DEVICE_TYPE_GPU, nvml.SUCCESS
	}
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		total := d.Config.MemoryMB << 20
		return nvml.Memory{Total: total, Free: total}, nvml.SUCCESS
	}
}

// memory answers Devices' memory question from the simulator's own state.
// (Calling the mock each time would also work, but go-nvml's mocks record
// every call in a slice that only grows.)
func (s *Sim) memory(i int) (total, used uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total[i], s.usedMiB[i]
}

// SetMemoryUsed pretends that processes use mib MiB of GPU index, so that
// FreeMiB and the simulated nvidia-smi show it.
func (s *Sim) SetMemoryUsed(index int, mib uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if index < 0 || index >= len(s.usedMiB) {
		return fmt.Errorf("set memory of GPU %d: %w", index, ErrNoSuchGPU)
	}
	s.usedMiB[index] = min(mib, s.total[index])
	return nil
}

// Profile returns the profile the server was built from.
func (s *Sim) Profile() *Profile { return s.profile }

// InjectXid makes GPU index report Xid xid, as a real GPU's driver does when
// it fails. A critical Xid (79: fallen off the bus, 48: double-bit ECC, ...)
// makes it unhealthy; an application Xid (13, 31, 43, ...) does not.
func (s *Sim) InjectXid(index int, xid uint64) error {
	if s.isClosed() {
		return ErrClosed
	}
	if index < 0 || index >= len(s.static) {
		return fmt.Errorf("inject Xid %d into GPU %d: %w", xid, index, ErrNoSuchGPU)
	}
	healthy, _ := s.health.state(index)
	s.health.record(HealthEvent{
		Index:   index,
		UUID:    s.static[index].UUID,
		Healthy: healthy && !IsCriticalXid(xid),
		Xid:     xid,
		Reason:  fmt.Sprintf("Xid %d: %s (simulated)", xid, XidReason(xid)),
	})
	s.cfg.log.Warn("simulated GPU fault", "gpu", index, "xid", xid)
	return nil
}

// Clear makes GPU index healthy again (NVIDIA's plugin never takes a GPU
// back; skiff's does).
func (s *Sim) Clear(index int) error {
	if s.isClosed() {
		return ErrClosed
	}
	if index < 0 || index >= len(s.static) {
		return fmt.Errorf("clear GPU %d: %w", index, ErrNoSuchGPU)
	}
	s.health.record(HealthEvent{Index: index, UUID: s.static[index].UUID, Healthy: true,
		Reason: "fault cleared (simulated)"})
	s.cfg.log.Info("simulated GPU fault cleared", "gpu", index)
	return nil
}

// levelOf is the inverse of pathOf.
func levelOf(p gputopology.PCIePath) nvml.GpuTopologyLevel {
	switch p {
	case gputopology.PIX:
		return nvml.TOPOLOGY_SINGLE
	case gputopology.PXB:
		return nvml.TOPOLOGY_MULTIPLE
	case gputopology.PHB:
		return nvml.TOPOLOGY_HOSTBRIDGE
	case gputopology.NODE:
		return nvml.TOPOLOGY_NODE
	}
	return nvml.TOPOLOGY_SYSTEM
}

// stableUUID derives a GPU UUID from where the GPU is, in UUID form.
func stableUUID(node, profile string, index int) string {
	h := sha256.Sum256(fmt.Appendf(nil, "skiff-sim/%s/%s/%d", node, profile, index))
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

func indexOfBus(srv *server.Server, busID string) int {
	for i, d := range srv.Devices {
		if strings.EqualFold(d.(*server.Device).PciBusID, busID) {
			return i
		}
	}
	return -1
}

// putCString writes s NUL-terminated into an NVML char array.
func putCString(dst []int8, s string) {
	for i := 0; i < len(s) && i < len(dst)-1; i++ {
		dst[i] = int8(s[i])
	}
}
