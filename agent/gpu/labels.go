package gpu

import (
	"strconv"
	"strings"

	"skiff.dev/skiff/api/gputopology"
)

// Label keys, as NVIDIA's GPU feature discovery writes them, plus skiff's
// own mark for simulated GPUs.
const (
	LabelPresent      = "nvidia.com/gpu.present"
	LabelProduct      = "nvidia.com/gpu.product"
	LabelCount        = "nvidia.com/gpu.count"
	LabelMemory       = "nvidia.com/gpu.memory" // MiB of one GPU
	LabelFamily       = "nvidia.com/gpu.family"
	LabelComputeMajor = "nvidia.com/gpu.compute.major"
	LabelComputeMinor = "nvidia.com/gpu.compute.minor"
	// GFD calls the driver version "cuda.driver": 550.54.15 → 550, 54, 15.
	LabelDriverMajor = "nvidia.com/cuda.driver.major"
	LabelDriverMinor = "nvidia.com/cuda.driver.minor"
	LabelDriverRev   = "nvidia.com/cuda.driver.rev"
	// and the CUDA version the driver supports "cuda.runtime": 12.4 → 12, 4.
	LabelRuntimeMajor = "nvidia.com/cuda.runtime.major"
	LabelRuntimeMinor = "nvidia.com/cuda.runtime.minor"
	LabelSimulated    = gputopology.LabelSimulated
)

// Labels are the node labels for these GPUs, in the form GPU feature
// discovery gives them, so course YAML that selects nodes by
// nvidia.com/gpu.product applies unchanged. Like GFD, the model labels
// describe the first GPU (a node usually has one model). No GPUs: no labels.
// Simulated GPUs get the real product name, and skiff.dev/gpu.simulated=true.
func Labels(devs []Device, simulated bool) map[string]string {
	labels := map[string]string{}
	if len(devs) == 0 {
		return labels
	}
	d := devs[0]
	labels[LabelPresent] = "true"
	labels[LabelProduct] = d.Product()
	labels[LabelCount] = strconv.Itoa(len(devs))
	labels[LabelMemory] = strconv.FormatUint(d.MemoryMiB, 10)
	labels[LabelFamily] = d.Family
	labels[LabelComputeMajor] = strconv.Itoa(d.ComputeMajor)
	labels[LabelComputeMinor] = strconv.Itoa(d.ComputeMinor)
	v := strings.Split(d.DriverVersion, ".")
	for i, key := range []string{LabelDriverMajor, LabelDriverMinor, LabelDriverRev} {
		if i < len(v) && v[i] != "" {
			labels[key] = v[i]
		}
	}
	c := strings.Split(d.CUDAVersion, ".")
	for i, key := range []string{LabelRuntimeMajor, LabelRuntimeMinor} {
		if i < len(c) && c[i] != "" {
			labels[key] = c[i]
		}
	}
	if simulated {
		labels[LabelSimulated] = "true"
	}
	return labels
}
