package gpu

import (
	"context"
	"errors"
	"strings"

	"skiff.dev/skiff/api/gputopology"
)

// Source finds the GPUs of this node.
//
// Rules for implementations and callers:
//   - All methods are safe for concurrent use.
//   - Devices and Topology do not block on anything but the driver; they
//     return a fresh copy each call, which the caller may keep and modify.
//   - Devices returns the devices ordered by Index (0..n-1). Topology
//     covers the same devices, in the same order.
//   - Watch returns a new channel of health events. The channel closes when
//     ctx is done or the Source is closed. Events are hints that something
//     changed; after one, call Devices for the current state. A watcher that
//     does not read keeps at most healthBuffer events; later ones are
//     dropped for it (the next Devices call still tells the truth).
//   - Close stops the Source's goroutines and releases the driver. It is
//     safe to call twice. Calls after Close return ErrClosed.
//   - Errors: ErrNoDriver when the NVIDIA driver is missing, ErrClosed after
//     Close, ErrNoSuchGPU for an index out of range; anything else wraps a
//     driver error.
type Source interface {
	// Name says where the GPUs come from: "nvml", "sim:dgxa100", "none", ...
	Name() string
	// Simulated reports whether the GPUs are simulated (no real hardware).
	Simulated() bool
	// Devices lists the GPUs with their current memory use and health.
	Devices(ctx context.Context) ([]Device, error)
	// Topology is the link matrix between the GPUs (nvidia-smi topo -m).
	Topology(ctx context.Context) (*gputopology.Topology, error)
	// Watch streams health changes until ctx is done or the Source closes.
	Watch(ctx context.Context) <-chan HealthEvent
	// Close releases the Source.
	Close() error
}

// FaultInjector is implemented by simulated sources: it lets a teacher (or a
// test) break a GPU the way a real one breaks, with an Xid error, and repair
// it. The agent reaches it with a type assertion on its Source.
type FaultInjector interface {
	// InjectXid records Xid xid on GPU index and emits a HealthEvent.
	// A critical Xid (see IsCriticalXid) makes the GPU unhealthy.
	InjectXid(index int, xid uint64) error
	// Clear makes GPU index healthy again and emits a HealthEvent.
	Clear(index int) error
}

// Errors a caller can branch on with errors.Is.
var (
	// ErrNoDriver: libnvidia-ml.so.1 could not be loaded. There are no real
	// GPUs on this machine (or the driver is not installed); the agent runs
	// without GPUs.
	ErrNoDriver = errors.New("NVIDIA driver not found (libnvidia-ml.so.1): no real GPUs")
	// ErrClosed: the Source was closed.
	ErrClosed = errors.New("gpu source closed")
	// ErrNoSuchGPU: a GPU index out of range.
	ErrNoSuchGPU = errors.New("no such GPU")
)

// Device is one GPU as the agent sees it. It is a plain value: copying it is
// safe, and changing a copy changes nothing in the Source.
type Device struct {
	// Index is the NVML index, as nvidia-smi numbers GPUs on the host.
	Index int `json:"index"`
	// UUID is the GPU's identity, e.g. "GPU-5c8a7d3e-...". The device plugin
	// advertises GPUs by UUID.
	UUID string `json:"uuid"`
	// Name as NVML reports it, e.g. "NVIDIA A100-SXM4-40GB".
	Name string `json:"name"`
	// MemoryMiB is the total memory; FreeMiB is what is not in use.
	MemoryMiB uint64 `json:"memoryMiB"`
	FreeMiB   uint64 `json:"freeMiB"`
	// PCIBusID in NVML's form, e.g. "00000000:07:00.0".
	PCIBusID string `json:"pciBusID"`
	// NUMANode the GPU is attached to, or -1 when unknown.
	NUMANode int `json:"numaNode"`
	// CPUAffinity lists the CPUs close to the GPU, e.g. "0-63,128-191";
	// empty when unknown.
	CPUAffinity string `json:"cpuAffinity,omitempty"`
	// MinorNumber is N in /dev/nvidiaN.
	MinorNumber int `json:"minorNumber"`
	// ComputeMajor and ComputeMinor are the CUDA compute capability (8.0 for A100).
	ComputeMajor int `json:"computeMajor"`
	ComputeMinor int `json:"computeMinor"`
	// Family is the architecture in GFD's words: "ampere", "hopper", ...
	Family string `json:"family"`
	// DriverVersion (e.g. "550.54.15") and CUDAVersion, the highest CUDA
	// version the driver supports (e.g. "12.4"), are the same for all GPUs of a node.
	DriverVersion string `json:"driverVersion"`
	CUDAVersion   string `json:"cudaVersion"`
	// Healthy is false after a critical Xid error, until the GPU recovers.
	Healthy bool `json:"healthy"`
	// LastXid is the last Xid error seen on the GPU (0: none).
	LastXid uint64 `json:"lastXid,omitempty"`
}

// Product is the GPU model in node-label form, like GPU feature discovery
// writes nvidia.com/gpu.product: the name with spaces replaced by '-'
// ("NVIDIA A100-SXM4-40GB" → "NVIDIA-A100-SXM4-40GB").
func (d Device) Product() string { return ProductLabel(d.Name) }

// ProductLabel turns a GPU name into its nvidia.com/gpu.product value.
func ProductLabel(name string) string {
	return strings.Join(strings.Fields(name), "-")
}

// HealthEvent says that a GPU's health changed or an Xid error was seen.
type HealthEvent struct {
	Index   int    `json:"index"`
	UUID    string `json:"uuid"`
	Healthy bool   `json:"healthy"`
	// Xid is the error that caused the event (0 for a recovery).
	Xid uint64 `json:"xid,omitempty"`
	// Reason is a human sentence: "Xid 79: GPU has fallen off the bus".
	Reason string `json:"reason"`
}

// IsCriticalXid reports whether an Xid error means the GPU is broken. Like
// NVIDIA's device plugin, it treats the Xids caused by an application (a
// bad kernel, not bad hardware) as harmless: 13 (graphics engine
// exception), 31 (GPU memory page fault), 43 (GPU stopped processing),
// 45 (preemptive cleanup), 68 (video processor exception), 109 (context
// switch timeout).
func IsCriticalXid(xid uint64) bool {
	switch xid {
	case 13, 31, 43, 45, 68, 109:
		return false
	}
	return true
}

// XidReason is a short human description of well-known Xid errors.
func XidReason(xid uint64) string {
	known := map[uint64]string{
		13:  "graphics engine exception",
		31:  "GPU memory page fault",
		43:  "GPU stopped processing",
		45:  "preemptive cleanup",
		48:  "double-bit ECC error",
		63:  "ECC page retirement",
		64:  "ECC page retirement failure",
		68:  "video processor exception",
		74:  "NVLink error",
		79:  "GPU has fallen off the bus",
		92:  "high single-bit ECC error rate",
		94:  "contained ECC error",
		95:  "uncontained ECC error",
		109: "context switch timeout",
		119: "GSP RPC timeout",
	}
	if r, ok := known[xid]; ok {
		return r
	}
	return "GPU error"
}
