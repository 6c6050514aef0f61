package cli

import (
	"slices"
	"sort"
	"strconv"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/gputopology"
	"skiff.dev/skiff/api/table"
)

// describeNodeGPUs writes the GPUs: section of `skiff describe node`, from
// the annotations the node's agent keeps (agent/gpu annotations.go): each
// GPU's index, model, UUID, health and the pod holding it. Nothing for a
// node without GPUs.
func describeNodeGPUs(w *describeWriter, n *api.Node) {
	raw, ok := n.Annotations[gputopology.AnnotationTopology]
	if !ok {
		return
	}
	ng, err := gputopology.ParseNodeGPUs(raw)
	if err != nil {
		w.line(0, "GPUs:\t<unreadable: %v>\n", err)
		return
	}
	allocs := map[string]string{}
	if s, ok := n.Annotations[gputopology.AnnotationAllocations]; ok {
		if a, err := gputopology.ParseAllocations(s); err == nil {
			allocs = a
		}
	}
	w.line(0, "GPUs:\n")
	if n.Labels[gputopology.LabelSimulated] == "true" {
		w.line(1, "(simulated GPUs)\n")
	}
	w.line(1, "Index\tModel\tUUID\tHealth\tPod\n")
	w.line(1, "-----\t-----\t----\t------\t---\n")
	devs := append([]gputopology.NodeGPU(nil), ng.Devices...)
	sort.Slice(devs, func(i, j int) bool { return devs[i].Index < devs[j].Index })
	for _, d := range devs {
		health := "Healthy"
		if !d.Healthy {
			health = "Unhealthy"
			if d.LastXid != 0 {
				health += " (Xid " + strconv.FormatUint(d.LastXid, 10) + ")"
			}
		}
		w.line(1, "%d\t%s\t%s\t%s\t%s\n", d.Index, d.Name, d.UUID, health, table.OrNone(allocs[d.UUID]))
	}
}

// describeNodeGPUDevices writes the GPU devices: section: each GPU split
// into the devices the node hands out (time-sliced replicas, MPS shares,
// MIG devices), what each holder may use, and who holds it. Nothing when
// every GPU is handed out whole. A HAMi node shows its slices instead
// (describeNodeHAMiSlices).
func describeNodeGPUDevices(w *describeWriter, n *api.Node, pods []*api.Pod) {
	if reg, ok := n.Annotations[api.HAMiNodeRegister]; ok && reg != "" {
		describeNodeHAMiSlices(w, reg, pods)
		return
	}
	raw, ok := n.Annotations[gputopology.AnnotationDevices]
	if !ok {
		return
	}
	nd, err := gputopology.ParseNodeDevices(raw)
	if err != nil {
		w.line(0, "GPU devices:\t<unreadable: %v>\n", err)
		return
	}
	shared := false
	for _, d := range nd.Devices {
		shared = shared || d.Sharing != "none"
	}
	if !shared {
		return
	}
	w.line(0, "GPU devices:\t(sharing %s, MIG strategy %s)\n", nd.Sharing, table.OrNone(nd.MIGStrategy))
	w.line(1, "GPU\tDevice\tKind\tResource\tMemory\tSMs\tHeld by\n")
	w.line(1, "---\t------\t----\t--------\t------\t---\t-------\n")
	for _, d := range nd.Devices {
		kind := d.Sharing
		if d.Profile != "" {
			kind += " " + d.Profile
		}
		w.line(1, "%d\t%s\t%s\t%s\t%dMiB\t%d%%\t%s\n", d.GPU, d.ID, kind, d.Resource, d.MemoryMiB, d.SMPercent, table.OrNone(d.Holder))
	}
}

// describeNodeHAMiSlices is the GPU devices: section of a HAMi node: per
// GPU of its registration (hami.io/node-nvidia-register), each slice the
// node's pods hold (pods: the node's non-terminated pods) with the memory
// and cores it took, then what is left of the GPU.
func describeNodeHAMiSlices(w *describeWriter, reg string, pods []*api.Pod) {
	devs, err := api.DecodeHAMiNodeDevices(reg)
	if err != nil {
		w.line(0, "GPU devices:\t<unreadable: %v>\n", err)
		return
	}
	usage := api.HAMiUsage(devs, slices.Values(pods), true)
	w.line(0, "GPU devices:\t(HAMi vGPU slices)\n")
	w.line(1, "GPU\tUUID\tSlice\tMemory\tCores\tHeld by\n")
	w.line(1, "---\t----\t-----\t------\t-----\t-------\n")
	for i, c := range usage {
		for j, s := range c.Slices {
			w.line(1, "%d\t%s\t%d/%d\t%dMiB\t%d%%\t%s (container %s)\n", i, c.Device.ID, j+1, c.Device.Count, s.Usedmem, s.Usedcores, s.Pod, s.Container)
		}
		w.line(1, "%d\t%s\tfree %d/%d\t%dMiB of %dMiB\t%d%% of %d%%\t<none>\n", i, c.Device.ID,
			int64(c.Device.Count)-c.Used, c.Device.Count, int64(c.Device.Devmem)-c.UsedMem, c.Device.Devmem,
			int64(c.Device.Devcore)-c.UsedCores, c.Device.Devcore)
	}
}
