package gpu

import (
	"fmt"
	"strconv"
	"strings"
)

// Sharing is how a GPU is handed to containers: whole, or split into
// devices of one of the upstream kinds.
type Sharing string

// The sharing kinds. The words are GFD's nvidia.com/gpu.sharing-strategy
// values where it has one (none, time-slicing, mps); mig and slice name
// MIG devices and HAMi-style vGPU slices.
const (
	// SharingNone: the device is the whole GPU.
	SharingNone Sharing = "none"
	// SharingTimeSlicing: a replica of a GPU; replicas take turns on all
	// of its SMs and share all of its memory, nothing is isolated.
	SharingTimeSlicing Sharing = "time-slicing"
	// SharingMPS: an MPS share; its processes run at once with the other
	// shares' on at most SMPercent of the SMs and MemoryMiB of memory.
	SharingMPS Sharing = "mps"
	// SharingMIG: a MIG device, a hardware partition with its own SMs and
	// memory.
	SharingMIG Sharing = "mig"
	// SharingSlice: a HAMi-style vGPU slice, limits enforced in the
	// container (HAMi-core) rather than by the GPU.
	SharingSlice Sharing = "slice"
)

// SubDevice is one device the node hands to containers: a whole GPU, a
// time-sliced replica, an MPS share, a MIG device or a slice. Every sharing
// mode of the node is described by the list of its SubDevices (its
// layout); the device plugin advertises them, the simulated driver's CDI
// spec defines one CDI device each, and the usage model (agent/gpu/usage)
// accounts load and memory against them. It is a plain value.
type SubDevice struct {
	// ID is what the device plugin advertises and the kubelet allocates:
	// the GPU UUID (whole), "<uuid>::<n>" (a replica or MPS share, as
	// NVIDIA's plugin names them), the MIG device's UUID, or a slice's ID.
	ID string `json:"id"`
	// Sharing is the kind of device.
	Sharing Sharing `json:"sharing"`
	// Resource is the extended resource it is advertised under:
	// nvidia.com/gpu, nvidia.com/gpu.shared, nvidia.com/mig-1g.5gb, ...
	Resource string `json:"resource"`
	// Parent is the physical GPU (its Index, UUID, Name, ...).
	ParentIndex int    `json:"parentIndex"`
	ParentUUID  string `json:"parentUUID"`
	// Replica is n of "<uuid>::<n>" (0 for other kinds).
	Replica int `json:"replica,omitempty"`
	// Domain is the memory domain the device's memory comes out of: the
	// parent GPU's UUID, or the MIG device's own UUID (MIG isolates).
	// Devices of one domain contend for its memory and its SMs.
	Domain string `json:"domain"`
	// DomainMiB is the memory of the domain (the GPU's, or the MIG
	// device's).
	DomainMiB uint64 `json:"domainMiB"`
	// MemoryMiB is the memory a holder may allocate: the whole GPU for a
	// time-sliced replica (it is not isolated), total/replicas for an MPS
	// share (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT), the MIG device's memory.
	MemoryMiB uint64 `json:"memoryMiB"`
	// SMPercent caps the SMs of the domain a holder may use: 100, or
	// 100/replicas for MPS (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE).
	SMPercent int `json:"smPercent"`
	// MIG is the MIG device, for SharingMIG.
	MIG *MIGDevice `json:"mig,omitempty"`
}

// MIGDevice is a MIG device: a GPU instance with one compute instance
// over all of it, as mig-parted creates them.
type MIGDevice struct {
	// UUID as NVML gives it: "MIG-<uuid>".
	UUID string `json:"uuid"`
	// Profile as nvidia-smi and the resource names spell it: "1g.5gb".
	Profile string `json:"profile"`
	// Index is the MIG device's index on its GPU (0..): nvidia-smi -L's
	// "MIG 1g.5gb Device 0".
	Index int `json:"index"`
	// GI and CI are the GPU and compute instance IDs.
	GI int `json:"gi"`
	CI int `json:"ci"`
	// Start and Size are the placement in memory slices (of 8).
	Start int `json:"start"`
	Size  int `json:"size"`
	// Slices are the compute slices (the "1" of 1g, of 7).
	Slices int `json:"slices"`
	// MemoryMiB of the device.
	MemoryMiB uint64 `json:"memoryMiB"`
	// SMs are the multiprocessors of the device.
	SMs int `json:"sms"`
}

// ReplicaID is NVIDIA's device plugin's ID of replica n of a GPU:
// "<uuid>::<n>".
func ReplicaID(uuid string, n int) string { return uuid + "::" + strconv.Itoa(n) }

// ParseReplicaID splits "<uuid>::<n>"; ok is false for an ID without "::".
func ParseReplicaID(id string) (uuid string, n int, ok bool) {
	u, rest, found := strings.Cut(id, "::")
	if !found {
		return id, 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 {
		return id, 0, false
	}
	return u, n, true
}

// WholeGPUs is the layout without sharing: one SubDevice per GPU, under
// resource (nvidia.com/gpu).
func WholeGPUs(devs []Device, resource string) []SubDevice {
	out := make([]SubDevice, 0, len(devs))
	for _, d := range devs {
		out = append(out, SubDevice{
			ID: d.UUID, Sharing: SharingNone, Resource: resource,
			ParentIndex: d.Index, ParentUUID: d.UUID,
			Domain: d.UUID, DomainMiB: d.MemoryMiB, MemoryMiB: d.MemoryMiB, SMPercent: 100,
		})
	}
	return out
}

// Replicas is the layout of time-slicing or MPS (sharing) with n replicas
// of every GPU, under resource. MPS divides memory and SMs by n, as NVIDIA's
// MPS control daemon sets them (set_default_device_pinned_mem_limit,
// set_default_active_thread_percentage).
func Replicas(devs []Device, sharing Sharing, n int, resource string) ([]SubDevice, error) {
	if n < 2 {
		return nil, fmt.Errorf("number of replicas must be >= 2")
	}
	if sharing != SharingTimeSlicing && sharing != SharingMPS {
		return nil, fmt.Errorf("replicas of kind %q: want time-slicing or mps", sharing)
	}
	out := make([]SubDevice, 0, len(devs)*n)
	for _, d := range devs {
		mem, sm := d.MemoryMiB, 100
		if sharing == SharingMPS {
			mem, sm = d.MemoryMiB/uint64(n), 100/n
		}
		for r := range n {
			out = append(out, SubDevice{
				ID: ReplicaID(d.UUID, r), Sharing: sharing, Resource: resource,
				ParentIndex: d.Index, ParentUUID: d.UUID, Replica: r,
				Domain: d.UUID, DomainMiB: d.MemoryMiB, MemoryMiB: mem, SMPercent: sm,
			})
		}
	}
	return out, nil
}
