package api

import (
	"fmt"
	"iter"
)

// HAMiSlice is one card of one container: the share of a GPU a pod holds
// under HAMi's decision.
type HAMiSlice struct {
	// Pod is "namespace/name"; Container the container's name.
	Pod       string
	Container string
	// Usedmem in MiB, Usedcores in percent of the card.
	Usedmem   int32
	Usedcores int32
}

// HAMiCardUsage is one registered card and what the pods hold on it.
// Sums are int64: no number of pods can overflow them.
type HAMiCardUsage struct {
	Device HAMiNodeDevice
	// Used is the number of slices held, UsedMem MiB, UsedCores percent.
	Used, UsedMem, UsedCores int64
	// Slices are the holders, in pod order (only with HAMiUsage's
	// holders set).
	Slices []HAMiSlice
}

// PodHAMiDevices is what a pod holds by HAMi's decision (allocated, else
// to allocate); nil for none or one that does not parse.
func PodHAMiDevices(p *Pod) HAMiPodDevices {
	s, ok := p.Annotations[HAMiDevicesAllocated]
	if !ok {
		s = p.Annotations[HAMiDevicesToAllocate]
	}
	pd, err := DecodeHAMiPodDevices(s)
	if err != nil {
		return nil
	}
	return pd
}

// HAMiUsage counts what pods hold on the registered cards devs (a card of
// a UUID not registered is not counted): the one count behind HAMi's
// scheduler and `describe node`. holders: keep each slice's holder.
func HAMiUsage(devs []HAMiNodeDevice, pods iter.Seq[*Pod], holders bool) []HAMiCardUsage {
	out := make([]HAMiCardUsage, len(devs))
	byID := make(map[string]int, len(devs))
	for i := range devs {
		out[i].Device = devs[i]
		byID[devs[i].ID] = i
	}
	for p := range pods {
		for ci, ctr := range PodHAMiDevices(p) {
			for _, d := range ctr {
				i, ok := byID[d.UUID]
				if !ok {
					continue
				}
				c := &out[i]
				c.Used++
				c.UsedMem += int64(d.Usedmem)
				c.UsedCores += int64(d.Usedcores)
				if holders {
					s := HAMiSlice{Pod: Key(p.Namespace, p.Name), Usedmem: d.Usedmem, Usedcores: d.Usedcores}
					if ci < len(p.Spec.Containers) {
						s.Container = p.Spec.Containers[ci].Name
					}
					c.Slices = append(c.Slices, s)
				}
			}
		}
	}
	return out
}

// HAMiCardWhy is one card's line in the explanation of a pod HAMi cannot
// place on a node: the card's reason (HAMi's word, "" when it would fit),
// then what is used, what the pod asks and the card's total, per
// dimension: "GPU 1 (GPU-…): CardInsufficientMemory: memory 38000+3000 >
// 40960 MiB; cores 30+30 of 100%; slices 2+1 of 10".
func HAMiCardWhy(index int, c HAMiCardUsage, reason string, askMem, askCores int64) string {
	if reason == "" {
		reason = "fits"
	}
	rel := func(used, ask, total int64) string {
		if used+ask > total {
			return ">"
		}
		return "of"
	}
	d := c.Device
	return fmt.Sprintf("GPU %d (%s): %s: memory %d used + %d asked %s %d MiB; cores %d used + %d asked %s %d%%; slices %d used + 1 %s %d",
		index, d.ID, reason, c.UsedMem, askMem, rel(c.UsedMem, askMem, int64(d.Devmem)), d.Devmem,
		c.UsedCores, askCores, rel(c.UsedCores, askCores, int64(d.Devcore)), d.Devcore,
		c.Used, rel(c.Used, 1, int64(d.Count)), d.Count)
}
