package nvidiasmi

import (
	_ "embed"
	"fmt"

	"skiff.dev/skiff/agent/gpu/usage"
)

// OOMMessage is the first line gpu-load prints when memory does not fit,
// as CUDA's runtime words cudaErrorMemoryAllocation (and PyTorch and
// HAMi-core after it).
const OOMMessage = "CUDA error: out of memory"

// GPULoadScript is gpu-load, the simulated CUDA workload of a simulated
// node, a POSIX sh script beside nvidia-smi:
//
//	gpu-load --util PERCENT [--mem MiB] [--seconds N]
//
// On every device of the container (the records in recordDir: whole
// GPUs, replicas, MPS shares, MIG devices) it holds PERCENT of the SMs and
// MiB of memory until it exits (after N seconds, or when killed), through
// the load protocol of agent/gpu/usage (loads under loadRoot). Memory is
// checked as CUDA would: more than the device allows (an MPS share's
// pinned limit, a MIG device's size) or more than its GPU has free (on a
// time-sliced GPU, neighbours' memory counts) fails with OOMMessage and
// exit status 1; nothing is held then. MPS's limits are also read from
// the container's environment (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE,
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT), where CUDA reads them, and can only
// lower what the device allows.
func GPULoadScript(recordDir, loadRoot string) []byte {
	return []byte(fmt.Sprintf(gpuLoadScript, quote(recordDir), quote(loadRoot), usage.LockName, usage.LockName, usage.LockName, OOMMessage))
}

// gpuLoadScript is gpu-load's text: a format to fill in with the records
// directory and the load root (quoted), the lock file's name and
// OOMMessage (a literal percent sign is doubled).
//
//go:embed gpuload.sh
var gpuLoadScript string
