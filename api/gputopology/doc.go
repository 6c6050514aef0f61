// Package gputopology is how the GPUs inside one node are connected, and
// what a node tells the scheduler about them. The agent builds a Topology
// from NVML (or the simulator, agent/gpu) and publishes it, with which
// GPUs are healthy and free, in the skiff.dev/gpu-topology annotation on
// its Node (NodeGPUs); the scheduler's GPUTopology plugin reads it back to
// rank nodes, and the device plugin picks the actual GPUs with the same
// PreferredSet, so both agree on what "well connected" means.
//
//   - topology.go: the link matrix (NVLink count and PCIe path per pair),
//     printed as `nvidia-smi topo -m` prints it.
//   - allocate.go: PairScore, SetScore, PreferredSet (the best-connected
//     set of n GPUs, as NVIDIA's plugin's GetPreferredAllocation), and
//     SetQuality (0..100, the scheduler's score).
//   - annotations.go: the Node annotations (topology, allocations).
//
// Everything here is pure: no I/O, safe for concurrent use once built.
package gputopology
