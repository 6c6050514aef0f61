package controlplane

import (
	"context"
	"encoding/json"
	"maps"
	"testing"

	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/api"
)

// FuzzGPUTopologyAnnotation: whatever an agent (or anyone who can write a
// Node) puts in the skiff.dev/gpu-topology annotation, the scheduler's
// score is unknown exactly when the annotation does not parse (or nothing
// is asked), else 0 to 100: the quality of the set the device plugin
// would pick. It is the same from the cache, and the node is not changed.
func FuzzGPUTopologyAnnotation(f *testing.F) {
	f.Add(topoNode(f, "n", []int{0, 1, 2, 3}).Annotations[gpu.AnnotationTopology], int8(2))
	f.Add(topoNode(f, "n", []int{0, 2, 3}).Annotations[gpu.AnnotationTopology], int8(4))
	for _, name := range []string{"dgxa100", "rtx4090x4"} {
		p, err := gpu.BuiltinProfile(name)
		if err != nil {
			f.Fatal(err)
		}
		sim, err := gpu.NewSim(p, "fuzz", nil)
		if err != nil {
			f.Fatal(err)
		}
		devs, _ := sim.Devices(context.Background())
		topo, _ := sim.Topology(context.Background())
		sim.Close()
		ng := gpu.NodeGPUs{Topology: topo, Healthy: []int{}, Free: []int{}}
		for _, d := range devs {
			ng.Devices = append(ng.Devices, gpu.NodeGPU{Index: d.Index, UUID: d.UUID, Name: d.Name, Healthy: true})
			ng.Healthy, ng.Free = append(ng.Healthy, d.Index), append(ng.Free, d.Index)
		}
		b, _ := json.Marshal(ng)
		f.Add(string(b), int8(3))
	}
	f.Add("{", int8(2))
	f.Add(`{"devices":[{"index":0}],"topology":{"links":[[{}]],"numaNodes":[0],"cpuAffinity":[""]},"free":[0,0,0]}`, int8(2))
	f.Add(`{"devices":[],"free":[]}`, int8(-1))
	p := newAnnotationTopology()
	f.Fuzz(func(t *testing.T, raw string, count int8) {
		if len(raw) > 64<<10 {
			t.Skip("input too large")
		}
		node := &api.Node{}
		node.Name = "n"
		node.Annotations = map[string]string{gpu.AnnotationTopology: raw, "other": "x"}
		before := maps.Clone(node.Annotations)
		ng, perr := gpu.ParseNodeGPUs(raw)
		want := int64(-1)
		if perr == nil && count > 0 && len(ng.Free) >= int(count) {
			want = 0
			if set := gpu.PreferredSet(ng.Topology, ng.Free, nil, int(count)); set != nil {
				want = gpu.SetQuality(ng.Topology, set)
			}
		}
		for i := range 2 { // the second call reads the cache
			score, ok := p.BestSetScore(node, int64(count))
			if ok != (perr == nil && count > 0) {
				t.Fatalf("call %d: known %v for an annotation that parses: %v (count %d)", i, ok, perr, count)
			}
			if ok && (score < 0 || score > 100) {
				t.Fatalf("call %d: score %d", i, score)
			}
			if want >= 0 && score != want {
				t.Fatalf("call %d: score %d, want %d", i, score, want)
			}
		}
		if !maps.Equal(before, node.Annotations) {
			t.Fatal("scoring changed the node's annotations")
		}
	})
}
