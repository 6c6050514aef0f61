package cluster

import (
	"strings"
	"testing"
)

// FuzzNodeGPUSpecs: --gpus for --nodes N gives N specs or an error; the
// machine's real GPUs (auto, auto-sim, nvml) go to one node at most, and
// every spec is one the user gave, or none / sim:dgxa100 for the rest.
func FuzzNodeGPUSpecs(f *testing.F) {
	for _, s := range []string{
		"sim:dgxa100,sim:dgxa100,none", "auto", "auto-sim", "nvml,nvml,none", "none", "", ",,", "sim:x.yaml , none ,auto",
		"sim:dgxh100", "auto,auto-sim", " ",
	} {
		f.Add(s, uint8(3))
		f.Add(s, uint8(1))
	}
	f.Fuzz(func(t *testing.T, spec string, n uint8) {
		if len(spec) > 1<<10 {
			t.Skip("input too large")
		}
		nodes := int(n%16) + 1
		out, err := nodeGPUSpecs(spec, nodes)
		if err != nil {
			return
		}
		if len(out) != nodes {
			t.Fatalf("--gpus %q --nodes %d: %d specs", spec, nodes, len(out))
		}
		given := map[string]bool{"none": true, "sim:dgxa100": true}
		for p := range strings.SplitSeq(spec, ",") {
			given[strings.TrimSpace(p)] = true
		}
		real := 0
		for _, s := range out {
			if !given[s] {
				t.Fatalf("--gpus %q --nodes %d: spec %q was not given", spec, nodes, s)
			}
			if s == "auto" || s == "auto-sim" || s == "nvml" || s == "" {
				real++
			}
		}
		if real > 1 {
			t.Fatalf("--gpus %q --nodes %d: the real GPUs on %d nodes: %q", spec, nodes, real, out)
		}
	})
}
