package gpudriver

import (
	"fmt"
	"strconv"
	"strings"

	"skiff.dev/skiff/agent/gpu/cdi"
	"skiff.dev/skiff/api"
)

// deviceSharing is how a prepared GPU is shared, from its claim's
// GpuConfig (or the default: time-slicing at the Default interval).
type deviceSharing struct {
	// Strategy: TimeSlicing or MPS.
	Strategy string `json:"strategy"`
	// Interval of time-slicing: Default, Short, Medium, Long. NVIDIA's
	// driver sets it on the GPU (nvidia-smi compute-policy
	// --set-timeslice); on a simulated GPU it is recorded here, with the
	// claim, and the container sees it in DRA_CLAIM_GPU_N_SHARING.
	Interval string `json:"interval,omitempty"`
	// Env is what the claim's CDI device adds to the container's
	// environment: for MPS, NVIDIA's client variables.
	Env []string `json:"env,omitempty"`
}

// resolveSharing picks each device's GpuConfig from the allocation's
// configs, normalises and validates every one, and works out what
// applying it means, all before the caller changes anything: a wrong
// config fails the prepare with NVIDIA's words and leaves no trace. The
// error is NVIDIA's prepareDevices error (the caller adds the claim).
func (d *Driver) resolveSharing(claim *api.ResourceClaim, devs []preparedDevice) error {
	configs, err := opaqueConfigs(claim.Status.Allocation.Devices.Config)
	if err != nil {
		return fmt.Errorf("error getting opaque device configs: %v", err)
	}
	def := DefaultGpuConfig()
	var order []*GpuConfig
	members := map[*GpuConfig][]int{}
	for i, dev := range devs {
		c := configFor(configs, dev.Requests[0])
		if c == nil {
			c = def
		}
		if _, ok := members[c]; !ok {
			order = append(order, c)
		}
		members[c] = append(members[c], i)
	}
	for _, c := range order {
		c.Normalize()
		if err := c.Validate(); err != nil {
			return fmt.Errorf("error validating GPU config: %w", err)
		}
		if err := d.applySharing(c.Sharing, claim, devs, members[c]); err != nil {
			return fmt.Errorf("error applying config: %w", err)
		}
	}
	return nil
}

// applySharing fills in the sharing of the devices at idx (one config's
// group, in the claim's order), as NVIDIA's applySharingConfig.
func (d *Driver) applySharing(s *GpuSharing, claim *api.ResourceClaim, devs []preparedDevice, idx []int) error {
	var requests, uuids []string
	for _, i := range idx {
		requests = append(requests, devs[i].Requests...)
		uuids = append(uuids, devs[i].UUID)
	}
	switch s.Strategy {
	case TimeSlicingStrategy:
		tsc, err := s.timeSlicingConfig()
		if err != nil {
			return fmt.Errorf("error getting timeslice config for requests '%v' in claim '%v': %w", requests, claim.UID, err)
		}
		interval := *tsc.Interval
		if interval != DefaultTimeSlice && !d.cfg.Source.Simulated() {
			return fmt.Errorf("error setting timeslice config for requests '%v' in claim '%v': %w", requests, claim.UID,
				fmt.Errorf("interval %s: skiff sets time-slice intervals only on simulated GPUs (NVIDIA's driver runs nvidia-smi compute-policy --set-timeslice)", interval))
		}
		for _, i := range idx {
			devs[i].Sharing = &deviceSharing{Strategy: TimeSlicingStrategy, Interval: interval,
				Env: []string{sharingEnv(devs[i].Device, TimeSlicingStrategy+"/"+interval)}}
		}
	case MpsStrategy:
		mpsc, err := s.mpsConfig()
		if err != nil {
			return fmt.Errorf("error getting MPS configuration: %w", err)
		}
		limits, err := mpsc.PinnedLimits(uuids)
		if err != nil {
			return fmt.Errorf("error starting MPS control daemon: %w",
				fmt.Errorf("error transforming DefaultPerDevicePinnedMemoryLimit into string: %w", err))
		}
		env := []string{"CUDA_MPS_PIPE_DIRECTORY=" + MPSPipeDirectory}
		if p := mpsc.DefaultActiveThreadPercentage; p != nil {
			env = append(env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="+strconv.Itoa(*p))
		}
		// CUDA's form: ordinal=limit, the ordinal of the device among the
		// config's devices (the container of one request sees them so).
		var pinned []string
		for n, u := range uuids {
			if l, ok := limits[u]; ok {
				pinned = append(pinned, fmt.Sprintf("%d=%s", n, l))
			}
		}
		if len(pinned) > 0 {
			env = append(env, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="+strings.Join(pinned, ","))
		}
		for _, i := range idx {
			devs[i].Sharing = &deviceSharing{Strategy: MpsStrategy,
				Env: append([]string{sharingEnv(devs[i].Device, MpsStrategy)}, env...)}
		}
	}
	return nil
}

// sharingEnv is skiff's note of a device's sharing in the container:
// DRA_CLAIM_GPU_3_SHARING=TimeSlicing/Long or MPS.
func sharingEnv(device, value string) string {
	return "DRA_CLAIM_" + cdi.EnvName(device) + "_SHARING=" + value
}
