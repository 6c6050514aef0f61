package api

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// HAMi's names (Project-HAMi/HAMi, the vGPU scheduler and device plugin),
// shared by the agent, which registers a node's GPUs and hands out the
// slices, and the scheduler, which decides them. A HAMi slice is a share
// of one GPU: a number of MiB of its memory and a percentage of its SMs,
// enforced inside the container (HAMi-core) rather than by the GPU.
const (
	// HAMiResourceMem is the memory of each card, in MiB.
	HAMiResourceMem = "nvidia.com/gpumem"
	// HAMiResourceMemPercentage is the memory of each card as a
	// percentage of the card's.
	HAMiResourceMemPercentage = "nvidia.com/gpumem-percentage"
	// HAMiResourceCores is the percentage of each card's SMs.
	HAMiResourceCores = "nvidia.com/gpucores"
	// HAMiResourcePriority is the task priority HAMi-core reads
	// (CUDA_TASK_PRIORITY).
	HAMiResourcePriority = "nvidia.com/priority"

	// HAMiNodeRegister is the node annotation in which HAMi's device
	// plugin registers the node's GPUs (EncodeHAMiNodeDevices).
	HAMiNodeRegister = "hami.io/node-nvidia-register"
	// HAMiNodeHandshake is the annotation HAMi's plugin refreshes with
	// "Reported <time>" beside the registration.
	HAMiNodeHandshake = "hami.io/node-handshake"
	// HAMiDevicesToAllocate is the scheduler's decision on a pod
	// (EncodeHAMiPodDevices), which the node's plugin reads at Allocate.
	HAMiDevicesToAllocate = "hami.io/vgpu-devices-to-allocate"
	// HAMiDevicesAllocated is the same decision, kept: what the pod holds.
	HAMiDevicesAllocated = "hami.io/vgpu-devices-allocated"
	// HAMiVGPUNode is the node the scheduler chose.
	HAMiVGPUNode = "hami.io/vgpu-node"
	// HAMiBindPhase is "allocating" until the node has handed the slices
	// out, then "success".
	HAMiBindPhase = "hami.io/bind-phase"
	// Its values: the scheduler writes allocating; the node's plugin
	// success once every container has its cards, failed if one could not.
	HAMiBindPhaseAllocating = "allocating"
	HAMiBindPhaseSuccess    = "success"
	HAMiBindPhaseFailed     = "failed"

	// HAMiNodeSchedulerPolicy and HAMiGPUSchedulerPolicy are the pod
	// annotations choosing binpack or spread over nodes and over the GPUs
	// of a node (defaults binpack and spread, HAMi's scheduler flags'
	// defaults).
	HAMiNodeSchedulerPolicy = "hami.io/node-scheduler-policy"
	HAMiGPUSchedulerPolicy  = "hami.io/gpu-scheduler-policy"
	HAMiPolicyBinpack       = "binpack"
	HAMiPolicySpread        = "spread"

	// HAMiUseGPUType and HAMiNoUseGPUType are comma-separated GPU types
	// (matched case-insensitively as substrings of the card's type:
	// "A100"); HAMiUseGPUUUID and HAMiNoUseGPUUUID comma-separated UUIDs.
	HAMiUseGPUType   = "nvidia.com/use-gputype"
	HAMiNoUseGPUType = "nvidia.com/nouse-gputype"
	HAMiUseGPUUUID   = "nvidia.com/use-gpuuuid"
	HAMiNoUseGPUUUID = "nvidia.com/nouse-gpuuuid"

	// HAMiNodeLabel=HAMiNodeLabelValue (gpu=on) is the node label HAMi's
	// chart runs its device plugin on: a node so labelled hands out its
	// GPUs as HAMi slices instead of NVIDIA's plugin's devices.
	HAMiNodeLabel      = "gpu"
	HAMiNodeLabelValue = "on"
	// HAMiDeviceSplitCount is how many slices one GPU may be split into
	// (HAMi's deviceSplitCount default): nvidia.com/gpu is GPUs × 10.
	HAMiDeviceSplitCount = 10
	// HAMiDeviceType is the device type in HAMi's pod annotations.
	HAMiDeviceType = "NVIDIA"

	// Environment HAMi's plugin gives the container; HAMi-core reads it.
	HAMiEnvMemoryLimitPrefix = "CUDA_DEVICE_MEMORY_LIMIT_" // + card index: "3000m"
	HAMiEnvSMLimit           = "CUDA_DEVICE_SM_LIMIT"      // "30"
	HAMiEnvTaskPriority      = "CUDA_TASK_PRIORITY"
)

// HAMiManagedResource reports whether name is one of HAMi's per-card
// resources, which no node advertises: HAMi's scheduler accounts them
// against its registration (the extender's managedResources, ignored by
// NodeResourcesFit on a HAMi node).
func HAMiManagedResource(name string) bool {
	switch name {
	case HAMiResourceMem, HAMiResourceMemPercentage, HAMiResourceCores, HAMiResourcePriority:
		return true
	}
	return false
}

// HAMiNodeDevice is one GPU in a node's HAMi registration.
type HAMiNodeDevice struct {
	// ID is the GPU's UUID.
	ID string
	// Count is how many slices it may be split into.
	Count int32
	// Devmem is its memory in MiB, Devcore its cores in percent (100).
	Devmem  int32
	Devcore int32
	// Type is "NVIDIA-" + the GPU's name ("NVIDIA-NVIDIA A100-SXM4-40GB").
	Type string
	// Numa is the GPU's NUMA node.
	Numa int
	// Health is false for a GPU with a fatal Xid.
	Health bool
}

// EncodeHAMiNodeDevices is HAMi's registration format: per GPU
// "UUID,count,devmem,devcore,type,numa,health" followed by ":".
func EncodeHAMiNodeDevices(devs []HAMiNodeDevice) string {
	var b strings.Builder
	for _, d := range devs {
		fmt.Fprintf(&b, "%s,%d,%d,%d,%s,%d,%t:", d.ID, d.Count, d.Devmem, d.Devcore, d.Type, d.Numa, d.Health)
	}
	return b.String()
}

// DecodeHAMiNodeDevices parses a registration. A node writes it, so it is
// checked: every field present and in range.
func DecodeHAMiNodeDevices(s string) ([]HAMiNodeDevice, error) {
	var out []HAMiNodeDevice
	for i, item := range strings.Split(s, ":") {
		if item == "" {
			continue
		}
		f := strings.Split(item, ",")
		if len(f) < 7 {
			return nil, fmt.Errorf("%s: device %d: want 7 fields (UUID,count,devmem,devcore,type,numa,health), got %d", HAMiNodeRegister, i, len(f))
		}
		d := HAMiNodeDevice{ID: f[0], Type: f[4]}
		var errs [5]error
		var n [4]int64
		n[0], errs[0] = strconv.ParseInt(f[1], 10, 32)
		n[1], errs[1] = strconv.ParseInt(f[2], 10, 32)
		n[2], errs[2] = strconv.ParseInt(f[3], 10, 32)
		n[3], errs[3] = strconv.ParseInt(f[5], 10, 32)
		d.Health, errs[4] = strconv.ParseBool(f[6])
		for _, err := range errs {
			if err != nil {
				return nil, fmt.Errorf("%s: device %d: %v", HAMiNodeRegister, i, err)
			}
		}
		if d.ID == "" || n[0] < 0 || n[1] < 0 || n[2] < 0 {
			return nil, fmt.Errorf("%s: device %d: empty UUID or negative count, memory or cores", HAMiNodeRegister, i)
		}
		d.Count, d.Devmem, d.Devcore, d.Numa = int32(n[0]), int32(n[1]), int32(n[2]), int(n[3])
		out = append(out, d)
	}
	return out, nil
}

// HAMiContainerDevice is one card of one container in HAMi's decision.
type HAMiContainerDevice struct {
	// UUID of the GPU.
	UUID string
	// Type is HAMiDeviceType.
	Type string
	// Usedmem in MiB and Usedcores in percent of the card.
	Usedmem   int32
	Usedcores int32
}

// HAMiPodDevices is a pod's decision: per container (in spec order), its
// cards.
type HAMiPodDevices [][]HAMiContainerDevice

// EncodeHAMiPodDevices is HAMi's format: per card "UUID,type,mem,cores:",
// and ";" after each container.
func EncodeHAMiPodDevices(pd HAMiPodDevices) string {
	var b strings.Builder
	for _, ctr := range pd {
		for _, d := range ctr {
			fmt.Fprintf(&b, "%s,%s,%d,%d:", d.UUID, d.Type, d.Usedmem, d.Usedcores)
		}
		b.WriteString(";")
	}
	return b.String()
}

// DecodeHAMiPodDevices parses a decision (a pod annotation: checked).
func DecodeHAMiPodDevices(s string) (HAMiPodDevices, error) {
	if s == "" {
		return nil, nil
	}
	ctrs := strings.Split(s, ";")
	if ctrs[len(ctrs)-1] == "" {
		ctrs = ctrs[:len(ctrs)-1]
	}
	out := make(HAMiPodDevices, 0, len(ctrs))
	for ci, c := range ctrs {
		var devs []HAMiContainerDevice
		for _, item := range strings.Split(c, ":") {
			if item == "" {
				continue
			}
			f := strings.Split(item, ",")
			if len(f) != 4 {
				return nil, fmt.Errorf("%s: container %d: want UUID,type,mem,cores, got %q", HAMiDevicesToAllocate, ci, item)
			}
			mem, err1 := strconv.ParseInt(f[2], 10, 32)
			cores, err2 := strconv.ParseInt(f[3], 10, 32)
			if err1 != nil || err2 != nil || mem < 0 || cores < 0 || cores > 100 || f[0] == "" {
				return nil, fmt.Errorf("%s: container %d: bad card %q", HAMiDevicesToAllocate, ci, item)
			}
			devs = append(devs, HAMiContainerDevice{UUID: f[0], Type: f[1], Usedmem: int32(mem), Usedcores: int32(cores)})
		}
		out = append(out, devs)
	}
	return out, nil
}

// HAMiRequest is what one container asks of HAMi: Nums cards, each with
// Memreq MiB (or MemPercentagereq percent of the card; 101 = not asked)
// and Coresreq percent of its SMs.
type HAMiRequest struct {
	Nums             int32
	Memreq           int32
	MemPercentagereq int32
	Coresreq         int32
}

// HAMiRequestOf is HAMi's GenerateResourceRequests for a container:
// nvidia.com/gpu from limits (else requests), gpumem or
// gpumem-percentage, gpucores (default d.Cores, the device config's
// defaultCores). Asking for neither memory nor its percentage asks for
// d.Memory MiB (defaultMemory), or 100% when that is 0. Zero Nums: the
// container asks for no GPU.
func HAMiRequestOf(c *Container, d HAMiRequestDefaults) HAMiRequest {
	get := func(name string) (int64, bool) {
		q, ok := c.Resources.Limits[name]
		if !ok {
			q, ok = c.Resources.Requests[name]
		}
		if !ok {
			return 0, false
		}
		v, inRange := ResourceAmount(name, q)
		if !inRange || v < 0 || v > 1<<31-1 {
			return 0, false
		}
		return v, true
	}
	n, ok := get(ResourceNvidiaGPU)
	if !ok || n == 0 {
		return HAMiRequest{}
	}
	r := HAMiRequest{Nums: int32(n), MemPercentagereq: 101}
	if m, ok := get(HAMiResourceMem); ok {
		r.Memreq = int32(m)
	}
	if p, ok := get(HAMiResourceMemPercentage); ok {
		r.MemPercentagereq = int32(p)
	}
	if r.MemPercentagereq == 101 && r.Memreq == 0 {
		if d.Memory > 0 {
			r.Memreq = d.Memory
		} else {
			r.MemPercentagereq = 100
		}
	}
	r.Coresreq = d.Cores
	if cr, ok := get(HAMiResourceCores); ok {
		r.Coresreq = int32(cr)
	}
	return r
}

// HAMiWebhookName is the name of HAMi's mutating webhook (its Helm
// chart's MutatingWebhookConfiguration), which Kubernetes names in a
// refusal: `admission webhook "vgpu.hami.io" denied the request: …`.
const HAMiWebhookName = "vgpu.hami.io"

// HAMiMutateAdmission is what HAMi's webhook does to a pod being created
// for NVIDIA GPUs (pkg/device/nvidia MutateAdmission), init containers
// first: nvidia.com/gpumem-percentage (limits, else requests) must be
// 0..100, in HAMi's words; a container with an nvidia.com/priority limit
// gets CUDA_TASK_PRIORITY with its value appended to its environment, the
// task priority HAMi-core reads (HAMi's example: 0 high, 1 low; HAMi does
// not check the value, nor does skiff); a container limiting
// nvidia.com/gpumem, gpumem-percentage or gpucores but not nvidia.com/gpu
// gets defaultGPUNum (1) of it. On an error p may be half changed:
// the caller discards it.
func HAMiMutateAdmission(p *Pod) error {
	for _, ctrs := range [][]Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range ctrs {
			if err := hamiMutateContainer(&ctrs[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

func hamiMutateContainer(c *Container) error {
	q, ok := c.Resources.Limits[HAMiResourceMemPercentage]
	if !ok {
		q, ok = c.Resources.Requests[HAMiResourceMemPercentage]
	}
	if ok {
		if pct := q.Value(); pct < 0 || pct > 100 {
			return fmt.Errorf("invalid %s value %d in container %s: must be an integer between 0 and 100", HAMiResourceMemPercentage, pct, c.Name)
		}
	}
	// HAMi's defaultGPUNum (1, the only value skiff's config takes): a
	// container limiting memory or cores but not the cards gets one card
	// (in its requests too, as defaulting would have put it).
	_, cards := c.Resources.Limits[ResourceNvidiaGPU]
	for _, name := range []string{HAMiResourceCores, HAMiResourceMem, HAMiResourceMemPercentage} {
		if _, ok := c.Resources.Limits[name]; ok && !cards {
			one := *resource.NewQuantity(1, resource.DecimalSI)
			c.Resources.Limits[ResourceNvidiaGPU] = one
			if c.Resources.Requests == nil {
				c.Resources.Requests = ResourceList{}
			}
			c.Resources.Requests[ResourceNvidiaGPU] = one
			break
		}
	}
	if q, ok := c.Resources.Limits[HAMiResourcePriority]; ok {
		c.Env = append(c.Env, EnvVar{Name: HAMiEnvTaskPriority, Value: strconv.FormatInt(q.Value(), 10)})
	}
	return nil
}
