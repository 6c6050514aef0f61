package usage

import (
	"strings"

	"skiff.dev/skiff/agent/gpu"
)

// The simulator's physics. Integer arithmetic throughout, so that the
// simulated nvidia-smi (a sh script, agent/gpu/nvidiasmi) computes the same
// numbers from the same loads.
const (
	// IdlePowerPercent of the board's power limit is drawn at 0 % load.
	IdlePowerPercent = 15
	// IdleTempC is a cool GPU; it warms by TempRiseC at 100 % load
	// (plus 0..8 °C per GPU, as GPUs of a server differ).
	IdleTempC = 30
	TempRiseC = 45
	// IdleSMClockMHz is the SM clock of an idle GPU; a busy one runs at
	// its boost clock (BoostClockMHz).
	IdleSMClockMHz = 210
	// MemCopyPerUtil: memory copy utilisation is this share (in tenths) of
	// the SM utilisation (the simulator has no bandwidth of its own).
	MemCopyPerUtil = 6
	// MIGComputeSlices is the compute slices of a whole GPU (the 7 of 7g.40gb).
	MIGComputeSlices = 7
)

// PowerLimitW is the board power of a GPU model, in W.
func PowerLimitW(name string) int {
	for _, m := range []struct {
		model string
		watts int
	}{{"A100-SXM", 400}, {"A100-PCIE", 250}, {"H100", 700}, {"H200", 700}, {"B200", 1000},
		{"RTX 4090", 450}, {"RTX 3090", 350}} {
		if strings.Contains(name, m.model) {
			return m.watts
		}
	}
	return 300
}

// BoostClockMHz is the SM boost clock of a GPU model.
func BoostClockMHz(name string) int {
	for _, m := range []struct {
		model string
		mhz   int
	}{{"A100", 1410}, {"H100", 1980}, {"H200", 1980}, {"B200", 1965}, {"RTX 4090", 2520}, {"RTX 3090", 1695}} {
		if strings.Contains(name, m.model) {
			return m.mhz
		}
	}
	return 1500
}

// PowerW at util percent: idle plus the rest of the limit in proportion.
func PowerW(limit, util int) int {
	idle := limit * IdlePowerPercent / 100
	return idle + (limit-idle)*util/100
}

// TemperatureC of GPU index at util percent.
func TemperatureC(index, util int) int {
	return IdleTempC + (index*7)%9 + util*TempRiseC/100
}

// SMClockMHz of a GPU model at util percent.
func SMClockMHz(name string, util int) int {
	if util == 0 {
		return IdleSMClockMHz
	}
	return BoostClockMHz(name)
}

// MemCopyUtil at util percent.
func MemCopyUtil(util int) int { return util * MemCopyPerUtil / 10 }

// Share is time-slicing's arithmetic: loads asking demand[i] percent of
// one domain's SMs (each already capped by its device) get all of it while
// the sum fits, and a proportional share of 100 % when it does not. It
// returns what each gets and the domain's utilisation.
func Share(demand []int) (got []int, util int) {
	sum := 0
	for _, d := range demand {
		sum += d
	}
	got = make([]int, len(demand))
	for i, d := range demand {
		got[i] = d
		if sum > 100 {
			got[i] = d * 100 / sum
		}
	}
	return got, min(sum, 100)
}

// domain is one memory domain of a GPU while the model runs.
type domain struct {
	util      int
	usedMiB   uint64
	totalMiB  uint64
	slices    int // MIG compute slices; 0 for a whole GPU's domain
	perDevice map[string][2]uint64
	loads     map[string][]Load
}

// Model computes one GPU's sample from its devices (sub, the node's layout
// on this GPU), the live loads of each domain and the holders of the
// devices. It is the simulator: real GPUs get their numbers from NVML.
func Model(d gpu.Device, sub []gpu.SubDevice, loads map[string][]Load, holders map[string]Holder) GPUSample {
	if len(sub) == 0 {
		sub = gpu.WholeGPUs([]gpu.Device{d}, "nvidia.com/gpu")
	}
	caps := map[string]int{}
	for _, sd := range sub {
		caps[sd.ID] = sd.SMPercent
	}
	doms := map[string]*domain{}
	var order []string
	for _, sd := range sub {
		if doms[sd.Domain] != nil {
			continue
		}
		dm := &domain{totalMiB: sd.DomainMiB, perDevice: map[string][2]uint64{}, loads: map[string][]Load{}}
		if sd.MIG != nil {
			dm.slices = sd.MIG.Slices
		} else {
			dm.usedMiB = d.MemoryMiB - min(d.FreeMiB, d.MemoryMiB) // memory the Source says is in use
		}
		ls := loads[sd.Domain]
		demand := make([]int, len(ls))
		for i, l := range ls {
			c, ok := caps[l.Device]
			if !ok {
				c = l.SMPercent // a device of an earlier layout: its own word
			}
			demand[i] = min(l.UtilPercent, c)
		}
		got, util := Share(demand)
		dm.util = util
		for i, l := range ls {
			dm.usedMiB += l.MemoryMiB
			pd := dm.perDevice[l.Device]
			dm.perDevice[l.Device] = [2]uint64{pd[0] + uint64(got[i]), pd[1] + l.MemoryMiB}
			dm.loads[l.Device] = append(dm.loads[l.Device], l)
		}
		doms[sd.Domain] = dm
		order = append(order, sd.Domain)
	}
	g := GPUSample{Index: d.Index, UUID: d.UUID, Name: d.Name, Healthy: d.Healthy,
		MemoryTotalMiB: d.MemoryMiB, PowerLimitW: float64(PowerLimitW(d.Name))}
	util := 0
	for _, id := range order {
		dm := doms[id]
		g.MemoryUsedMiB += dm.usedMiB
		if dm.slices > 0 {
			util += dm.util * dm.slices // summed below over the 7 slices
		} else {
			util += dm.util * MIGComputeSlices
		}
	}
	g.UtilPercent = min(util/MIGComputeSlices, 100)
	g.MemoryUsedMiB = min(g.MemoryUsedMiB, g.MemoryTotalMiB)
	g.MemoryFreeMiB = g.MemoryTotalMiB - g.MemoryUsedMiB
	g.MemCopyUtilPercent = MemCopyUtil(g.UtilPercent)
	g.PowerW = float64(PowerW(PowerLimitW(d.Name), g.UtilPercent))
	g.TemperatureC = TemperatureC(d.Index, g.UtilPercent)
	g.SMClockMHz = SMClockMHz(d.Name, g.UtilPercent)
	for _, sd := range sub {
		dm := doms[sd.Domain]
		pd := dm.perDevice[sd.ID]
		ds := DeviceSample{SubDevice: sd, UtilPercent: min(int(pd[0]), 100), DomainUtilPercent: dm.util,
			MemoryTotalMiB: sd.MemoryMiB, MemoryUsedMiB: pd[1], Loads: dm.loads[sd.ID]}
		domFree := dm.totalMiB - min(dm.usedMiB, dm.totalMiB)
		ds.MemoryFreeMiB = min(sd.MemoryMiB-min(pd[1], sd.MemoryMiB), domFree)
		if h, ok := holders[sd.ID]; ok {
			ds.Holder = &h
		}
		g.Devices = append(g.Devices, ds)
	}
	return g
}
