// Package gpu discovers the GPUs of a node: what they are, how they are
// connected, and whether they are healthy. It is the agent's only view of
// GPUs; the device plugin (agent/devices and the built-in NVML plugin) and
// the node labels are built on it.
//
// # Sources
//
// A [Source] is one way to find GPUs. There are three:
//
//   - NVML (nvml.go): the real driver, through github.com/NVIDIA/go-nvml.
//     The library libnvidia-ml.so.1 is loaded at run time, so the skiff
//     binary runs on machines without a driver; there, [NewNVML] returns
//     [ErrNoDriver] and the agent runs with no GPUs.
//   - Simulated servers (sim.go): go-nvml's own mock DGX A100/H100/H200/B200
//     servers, plus what the mocks lack (real PCI bus ids, a topology matrix,
//     free memory, fault injection), or a user profile in YAML (profile.go).
//     The simulator answers the same NVML calls the real path makes, and the
//     same discovery code (nvml.go) reads both.
//   - None: no GPUs.
//
// [Open] turns the agent flag --gpus into a Source. Simulated GPUs appear
// only when asked for: skiff never pretends that a real GPU exists.
//
// # Invariants
//
//   - Devices are numbered 0..n-1 like NVML (and nvidia-smi) number them.
//     Index, UUID and PCI bus id are stable for the life of a Source; the
//     UUIDs of a simulated server are stable across restarts of the agent
//     (they derive from the node name), so a checkpoint of allocations
//     that names UUIDs stays true.
//   - A Topology is read-only once built and safe for concurrent use.
//   - Health events are hints; [Source.Devices] is the truth. A consumer
//     that sees an event re-reads the devices (level-triggered, like every
//     control loop in skiff).
//
// # Around the package
//
//   - labels.go: node labels in the form of GPU feature discovery.
//   - api/gputopology: the link matrix (Topology), the best-connected set
//     of GPUs for a multi-GPU request (PreferredSet) and the Node
//     annotation the agent publishes them in, shared with the scheduler.
//   - agent/gpu/nvidiasmi: a simulated nvidia-smi for containers.
//   - agent/gpu/cdi: CDI specs that expose simulated GPUs to containers.
package gpu
