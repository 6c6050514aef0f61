package cli

import (
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
