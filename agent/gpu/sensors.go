package gpu

import (
	"context"
	"errors"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Sensors are what a GPU's driver measures now: the numbers of NVIDIA's
// dcgm-exporter (which reads them from the same NVML calls).
type Sensors struct {
	// UtilPercent and MemCopyUtilPercent: nvmlDeviceGetUtilizationRates
	// (gpu, memory).
	UtilPercent        int
	MemCopyUtilPercent int
	// MemoryTotalMiB and MemoryUsedMiB: nvmlDeviceGetMemoryInfo.
	MemoryTotalMiB uint64
	MemoryUsedMiB  uint64
	// PowerW: nvmlDeviceGetPowerUsage; PowerLimitW:
	// nvmlDeviceGetEnforcedPowerLimit.
	PowerW      float64
	PowerLimitW float64
	// TemperatureC: nvmlDeviceGetTemperature (GPU sensor).
	TemperatureC int
	// SMClockMHz: nvmlDeviceGetClockInfo (SM).
	SMClockMHz int
}

// SensorReader is implemented by the real NVML source: the driver's
// sensors of every GPU, by index. A reading the GPU does not support
// (NOT_SUPPORTED, as on some boards and on MIG devices) is left 0. The
// simulated source has no sensors: its numbers come from the usage model
// (agent/gpu/usage).
type SensorReader interface {
	ReadSensors(ctx context.Context) ([]Sensors, error)
}

var _ SensorReader = (*nvmlSource)(nil)

// ErrNoSensors: a simulated GPU has no driver to ask.
var ErrNoSensors = errors.New("simulated GPUs have no sensors: read agent/gpu/usage")

// ReadSensors asks NVML about every GPU.
func (s *nvmlSource) ReadSensors(ctx context.Context) ([]Sensors, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	if s.cfg.simulated {
		return nil, ErrNoSensors
	}
	out := make([]Sensors, len(s.handles))
	for i, h := range s.handles {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var r Sensors
		if u, ret := h.GetUtilizationRates(); ret == nvml.SUCCESS {
			r.UtilPercent, r.MemCopyUtilPercent = int(u.Gpu), int(u.Memory)
		}
		if m, ret := h.GetMemoryInfo(); ret == nvml.SUCCESS {
			r.MemoryTotalMiB, r.MemoryUsedMiB = m.Total>>20, m.Used>>20
		}
		if p, ret := h.GetPowerUsage(); ret == nvml.SUCCESS {
			r.PowerW = float64(p) / 1000 // milliwatts
		}
		if p, ret := h.GetEnforcedPowerLimit(); ret == nvml.SUCCESS {
			r.PowerLimitW = float64(p) / 1000
		}
		if t, ret := h.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
			r.TemperatureC = int(t)
		}
		if c, ret := h.GetClockInfo(nvml.CLOCK_SM); ret == nvml.SUCCESS {
			r.SMClockMHz = int(c)
		}
		out[i] = r
	}
	return out, nil
}
