// Package usage is what a node's GPUs are doing: utilisation, memory,
// power, temperature and clocks of every physical GPU and of every device
// the node hands out of it (a whole GPU, a time-sliced replica, an MPS
// share, a MIG device, a HAMi-style slice), and which container holds
// each. On real GPUs the numbers are the driver's (NVML, gpu.SensorReader);
// on simulated ones this package is the simulator: a model of how the
// loads of the simulated CUDA workload (gpu-load, agent/gpu/nvidiasmi)
// share the hardware.
//
// # The model
//
// A device belongs to a memory domain (gpu.SubDevice.Domain): its GPU, or
// for a MIG device the MIG device itself. Loads contend within a domain
// and never across domains:
//
//   - SMs: a load asks UTIL percent of its domain's SMs, capped by its
//     device's SMPercent (100, or 100/replicas for an MPS share). While
//     the asks sum to at most 100 every load gets what it asked; past
//     that, time-slicing gives each its proportional share (Share). MIG
//     domains are separate hardware: a GPU's utilisation is the sum over
//     its domains weighted by their compute slices (of 7).
//   - Memory: a load holds MEM MiB of its domain. An allocation fails with
//     CUDA's "out of memory" (ErrOutOfMemory) past its device's MemoryMiB
//     (an MPS share's pinned limit, a MIG device's size, a slice's limit)
//     or past what its domain has free: on a time-sliced GPU a neighbour's
//     memory counts, so one replica can push another out of memory (the
//     upstream pain, shown).
//   - Power and temperature follow utilisation (PowerW, TemperatureC), the
//     SM clock is the model's boost clock when busy (SMClockMHz), memory
//     copy utilisation a fixed share of the SM utilisation (MemCopyUtil).
//     Integer arithmetic: the simulated nvidia-smi computes the same.
//
// # The load protocol (load.go)
//
// A container talks to its node's simulator through files, as a real
// container talks to the driver through its /dev nodes: the simulated
// driver's CDI spec mounts each device's domain directory
// (ROOT/DOMAIN, read-write) into the container. gpu-load writes
// TOKEN.load there and holds TOKEN.fifo open for as long as it lives; a
// load whose fifo has no reader is dead, so kill -9 of the process or of
// its container ends the load at once, and nothing on the node has to
// have seen it happen (an agent killed -9 and restarted finds the truth
// in the files). Records are read as data, bounded and without following
// links: a container writes them.
//
// # The contract (the DCGM-style exporter, HAMi-style slices, the views)
//
//   - Sampler.Sample(ctx) (*Sample, error) is the one read: Sample.GPUs
//     in NVML order, each a GPUSample with the dcgm-exporter's numbers
//     (UtilPercent = DCGM_FI_DEV_GPU_UTIL, MemCopyUtilPercent,
//     MemoryUsedMiB/MemoryFreeMiB = FB_USED/FB_FREE, PowerW, TemperatureC,
//     SMClockMHz) and Devices, one DeviceSample per device of the node's
//     current layout on that GPU: its gpu.SubDevice (ID, Sharing,
//     Resource, MIG profile...), the utilisation and memory its holder
//     sees, and Holder (namespace, pod, container) when allocated.
//     agent.GPUs.Meter is the node's Meter.
//   - A HAMi slot (a node labelled gpu=on, agent/devices/gpuplugin
//     HAMiSlots) is a gpu.SubDevice with Sharing SharingSlice, ID
//     "<uuid>::<n>", its Domain its GPU's UUID, and the whole GPU's
//     MemoryMiB and SMPercent: the slot only counts slices. The slice's
//     own limits are the container's HAMi-core environment
//     (CUDA_DEVICE_MEMORY_LIMIT_<i>, CUDA_DEVICE_SM_LIMIT), which gpu-load
//     obeys (its load record's SM is capped by them); so a slot's
//     DeviceSample shows the GPU's limits and the holder's real load and
//     memory, and the GPU's numbers sum every holder of its domain.
//   - Config.Layout and Config.Holders are how the device plugin and the
//     device manager tell the Meter what exists and who holds it.
//   - Hold starts a load from Go (a node on the simulated runtime, tests);
//     the Held value ends it (Release) or dies like a killed one (Kill).
//
// # Invariants
//
//   - Sample never blocks on a container and never trusts a record: a
//     damaged or dead load is removed, never counted.
//   - Loads are per device ID; a load whose device left the layout (the
//     sharing config changed under a running pod) still counts in its
//     domain, as its memory is still in use on the GPU.
package usage
