package gpudriver

import (
	"fmt"
	"path/filepath"
	"strings"

	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/api/gputopology"
)

// nvlinkDomains numbers the groups of GPUs joined by NVLinks (the
// connected parts of the NVLink graph) 0, 1, ... in GPU order; a GPU
// without NVLinks gets -1.
func nvlinkDomains(t *gputopology.Topology) []int {
	n := t.N()
	out := make([]int, n)
	for i := range out {
		out[i] = -1
	}
	next := 0
	for i := 0; i < n; i++ {
		if out[i] >= 0 {
			continue
		}
		linked := false
		for j := 0; j < n; j++ {
			if t.Link(i, j).NVLinks > 0 {
				linked = true
			}
		}
		if !linked {
			continue
		}
		stack := []int{i}
		out[i] = next
		for len(stack) > 0 {
			a := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for b := 0; b < n; b++ {
				if out[b] < 0 && t.Link(a, b).NVLinks > 0 {
					out[b] = next
					stack = append(stack, b)
				}
			}
		}
		next++
	}
	return out
}

// pcieRoots names each GPU's PCIe root complex (pci0000:00), as
// Kubernetes' deviceattribute package reads it from sysfs. Real GPUs:
// from /sys/bus/pci/devices; simulated ones: the GPUs the matrix puts
// under one PCIe switch tree (PIX or PXB) share a root, named after the
// lowest bus of the group.
func pcieRoots(gpus []gpu.Device, t *gputopology.Topology, simulated bool) []string {
	out := make([]string, len(gpus))
	if !simulated {
		for i, g := range gpus {
			out[i] = sysfsPCIeRoot(pciBusID(g.PCIBusID))
		}
		return out
	}
	group := make([]int, len(gpus))
	for i := range group {
		group[i] = -1
	}
	for i := range gpus {
		if group[i] >= 0 {
			continue
		}
		group[i] = i
		for j := i + 1; j < len(gpus); j++ {
			if p := t.Link(i, j).PCIe; group[j] < 0 && (p == gputopology.PIX || p == gputopology.PXB) {
				group[j] = i
			}
		}
	}
	for i := range gpus {
		lead := pciBusID(gpus[group[i]].PCIBusID)
		dom, rest, ok := strings.Cut(lead, ":")
		bus, _, _ := strings.Cut(rest, ":")
		if !ok || len(bus) != 2 {
			out[i] = fmt.Sprintf("pci0000:%02x", group[i])
			continue
		}
		out[i] = "pci" + dom + ":" + bus[:1] + "0"
	}
	return out
}

func sysfsPCIeRoot(bus string) string {
	if bus == "" {
		return ""
	}
	p, err := filepath.EvalSymlinks(filepath.Join("/sys/bus/pci/devices", bus))
	if err != nil {
		return ""
	}
	for _, part := range strings.Split(p, "/") {
		if strings.HasPrefix(part, "pci") && strings.Contains(part, ":") {
			return part
		}
	}
	return ""
}
