package gpu

import "context"

// MIGProfileID is nvidia-smi's GPU instance profile ID (mig -lgip, -lgi)
// of a profile of slices compute slices and memSlices memory slices (of
// 8): 19 for 1g.5gb, 15 for 1g.10gb, 14 for 2g.10gb, 9 for 3g.20gb, 5 for
// 4g.20gb, 0 for 7g.40gb (and the same for the other GPUs' sizes).
func MIGProfileID(slices, memSlices int) int {
	switch {
	case slices == 1 && memSlices == 1:
		return 19
	case slices == 1:
		return 15
	case slices == 2:
		return 14
	case slices == 3:
		return 9
	case slices == 4:
		return 5
	}
	return 0
}

// MIGSource is a Source whose GPUs can be partitioned with MIG (the
// simulator; real NVML through go-nvml): the MIG devices of every
// MIG-enabled GPU, by GPU index, each with its placement and memory.
type MIGSource interface {
	MIGDevices(ctx context.Context) (map[int][]MIGDevice, error)
}
