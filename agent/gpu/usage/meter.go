package usage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"skiff.dev/skiff/agent/gpu"
)

// Holder is the container a device was allocated to (the device plugin
// path), or the ResourceClaim that holds it (DRA: Claim set, Pod and
// Container empty).
type Holder struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod,omitempty"`
	Container string `json:"container,omitempty"`
	Claim     string `json:"claim,omitempty"`
}

// String is "namespace/pod/container", or "claim namespace/name".
func (h Holder) String() string {
	if h.Claim != "" {
		return "claim " + h.Namespace + "/" + h.Claim
	}
	return h.Namespace + "/" + h.Pod + "/" + h.Container
}

// Sample is what the node's GPUs do at one moment.
type Sample struct {
	Time time.Time `json:"time"`
	// Source is the GPU source's name ("nvml", "sim:dgxa100").
	Source string `json:"source"`
	// Simulated: the values come from the simulator, not a driver.
	Simulated bool `json:"simulated"`
	// GPUs in NVML order.
	GPUs []GPUSample `json:"gpus"`
}

// GPUSample is one physical GPU. The fields are the series of NVIDIA's
// dcgm-exporter, named after them.
type GPUSample struct {
	Index int    `json:"index"`
	UUID  string `json:"uuid"`
	Name  string `json:"name"`
	// UtilPercent: DCGM_FI_DEV_GPU_UTIL.
	UtilPercent int `json:"utilPercent"`
	// MemCopyUtilPercent: DCGM_FI_DEV_MEM_COPY_UTIL.
	MemCopyUtilPercent int `json:"memCopyUtilPercent"`
	// Memory: DCGM_FI_DEV_FB_USED and DCGM_FI_DEV_FB_FREE (MiB).
	MemoryTotalMiB uint64 `json:"memoryTotalMiB"`
	MemoryUsedMiB  uint64 `json:"memoryUsedMiB"`
	MemoryFreeMiB  uint64 `json:"memoryFreeMiB"`
	// PowerW: DCGM_FI_DEV_POWER_USAGE; PowerLimitW the board's limit.
	PowerW      float64 `json:"powerW"`
	PowerLimitW float64 `json:"powerLimitW"`
	// TemperatureC: DCGM_FI_DEV_GPU_TEMP.
	TemperatureC int `json:"temperatureC"`
	// SMClockMHz: DCGM_FI_DEV_SM_CLOCK.
	SMClockMHz int  `json:"smClockMHz"`
	Healthy    bool `json:"healthy"`
	// Devices are the devices of the node's current layout on this GPU
	// (one, the whole GPU, without sharing).
	Devices []DeviceSample `json:"devices"`
}

// Holders lists who holds a device of the GPU, once each, sorted.
func (g GPUSample) Holders() []Holder {
	var out []Holder
	for _, d := range g.Devices {
		if d.Holder != nil && !slices.Contains(out, *d.Holder) {
			out = append(out, *d.Holder)
		}
	}
	slices.SortFunc(out, func(a, b Holder) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// DeviceSample is one device of a GPU: the whole GPU, a replica, an MPS
// share, a MIG device or a slice, and what its holder sees and does.
type DeviceSample struct {
	gpu.SubDevice
	// UtilPercent is the share of its domain's SMs its loads get (after
	// time-slicing's sharing and MPS's cap).
	UtilPercent int `json:"utilPercent"`
	// DomainUtilPercent is the utilisation of its whole domain (the GPU,
	// or the MIG device): what nvidia-smi in its container shows.
	DomainUtilPercent int `json:"domainUtilPercent"`
	// MemoryTotalMiB is what its holder may use (SubDevice.MemoryMiB);
	// MemoryUsedMiB what its loads hold; MemoryFreeMiB what it could
	// still allocate (less when neighbours in its domain use memory).
	MemoryTotalMiB uint64 `json:"memoryTotalMiB"`
	MemoryUsedMiB  uint64 `json:"memoryUsedMiB"`
	MemoryFreeMiB  uint64 `json:"memoryFreeMiB"`
	// Holder is the container it is allocated to; nil when free.
	Holder *Holder `json:"holder,omitempty"`
	// Loads running on it.
	Loads []Load `json:"loads,omitempty"`
}

// Sampler is what the exporter, describe node and the dashboard read.
// Sample must be safe for concurrent use and must not block on anything
// but the driver.
type Sampler interface {
	Sample(ctx context.Context) (*Sample, error)
}

// Config of a Meter.
type Config struct {
	// Source of the GPUs; required.
	Source gpu.Source
	// Root is the directory of the simulated loads (the simulated
	// driver's, agent/gpu/cdi Config.LoadRoot); "" for none (real GPUs).
	Root string
	// Layout is the node's current devices (the device plugin's); nil:
	// every GPU whole.
	Layout func() []gpu.SubDevice
	// Holders maps device IDs to the containers they are allocated to (the
	// device manager's and the DRA driver's allocations); nil: none known.
	Holders func() map[string]Holder
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
}

// Meter samples the GPUs of a node: the simulator's model over the loads
// of the simulated containers, or the driver's sensors through NVML.
type Meter struct {
	cfg Config
	mu  sync.Mutex // one sweep of the load directories at a time
}

var _ Sampler = (*Meter)(nil)

// New builds a Meter.
func New(cfg Config) (*Meter, error) {
	if cfg.Source == nil {
		return nil, errors.New("GPU meter: a GPU source is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Meter{cfg: cfg}, nil
}

// Sample reads the GPUs now. Dead loads are removed on the way.
func (m *Meter) Sample(ctx context.Context) (*Sample, error) {
	devs, err := m.cfg.Source.Devices(ctx)
	if err != nil {
		return nil, fmt.Errorf("sample GPUs: %w", err)
	}
	layout := m.layout(devs)
	var holders map[string]Holder
	if m.cfg.Holders != nil {
		holders = m.cfg.Holders()
	}
	s := &Sample{Time: m.cfg.Now(), Source: m.cfg.Source.Name(), Simulated: m.cfg.Source.Simulated()}
	var sensors []gpu.Sensors
	if sr, ok := m.cfg.Source.(gpu.SensorReader); ok && !m.cfg.Source.Simulated() {
		if sensors, err = sr.ReadSensors(ctx); err != nil {
			return nil, fmt.Errorf("sample GPUs: %w", err)
		}
	}
	loads, err := m.readLoads(layout)
	if err != nil {
		return nil, err
	}
	for _, d := range devs {
		var sub []gpu.SubDevice
		for _, sd := range layout {
			if sd.ParentUUID == d.UUID {
				sub = append(sub, sd)
			}
		}
		g := Model(d, sub, loads, holders)
		if d.Index < len(sensors) {
			g = withSensors(g, sensors[d.Index])
		}
		s.GPUs = append(s.GPUs, g)
	}
	return s, nil
}

func (m *Meter) layout(devs []gpu.Device) []gpu.SubDevice {
	if m.cfg.Layout != nil {
		if l := m.cfg.Layout(); len(l) > 0 {
			return l
		}
	}
	return gpu.WholeGPUs(devs, "nvidia.com/gpu")
}

// readLoads reads the live loads of every domain of the layout.
func (m *Meter) readLoads(layout []gpu.SubDevice) (map[string][]Load, error) {
	if m.cfg.Root == "" {
		return nil, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]Load{}
	for _, sd := range layout {
		if _, done := out[sd.Domain]; done || !ValidDomain(sd.Domain) {
			continue
		}
		ls, err := ReadDomain(DomainDir(m.cfg.Root, sd.Domain))
		if err != nil {
			return nil, err
		}
		out[sd.Domain] = ls
	}
	return out, nil
}

// Sweep removes the files of dead loads now (a container was killed).
func (m *Meter) Sweep(ctx context.Context) error {
	devs, err := m.cfg.Source.Devices(ctx)
	if err != nil {
		return err
	}
	_, err = m.readLoads(m.layout(devs))
	return err
}

// withSensors replaces the model's numbers by the driver's (real GPUs).
func withSensors(g GPUSample, s gpu.Sensors) GPUSample {
	g.UtilPercent, g.MemCopyUtilPercent = s.UtilPercent, s.MemCopyUtilPercent
	g.PowerW, g.TemperatureC, g.SMClockMHz = s.PowerW, s.TemperatureC, s.SMClockMHz
	if s.PowerLimitW > 0 {
		g.PowerLimitW = s.PowerLimitW
	}
	if s.MemoryTotalMiB > 0 {
		g.MemoryTotalMiB, g.MemoryUsedMiB = s.MemoryTotalMiB, s.MemoryUsedMiB
		g.MemoryFreeMiB = s.MemoryTotalMiB - min(s.MemoryUsedMiB, s.MemoryTotalMiB)
	}
	return g
}
