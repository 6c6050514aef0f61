package plugins

import (
	"maps"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/gputopology"
)

// FuzzGPUTopologyAnnotation: whatever an agent (or anyone who can write a
// Node) puts in the skiff.dev/gpu-topology annotation, the scheduler's
// score is unknown exactly when the annotation does not parse (or nothing
// is asked), else 0 to 100: the quality of the set the device plugin
// would pick. It is the same from the cache, and the node is not changed.
func FuzzGPUTopologyAnnotation(f *testing.F) {
	f.Add(topoNode(f, "n", []int{0, 1, 2, 3}).Annotations[gputopology.AnnotationTopology], int8(2))
	f.Add(topoNode(f, "n", []int{0, 2, 3}).Annotations[gputopology.AnnotationTopology], int8(4))
	f.Add("{", int8(2))
	f.Add(`{"devices":[{"index":0}],"topology":{"links":[[{}]],"numaNodes":[0],"cpuAffinity":[""]},"free":[0,0,0]}`, int8(2))
	f.Add(`{"devices":[],"free":[]}`, int8(-1))
	p := NewGPUTopology()
	f.Fuzz(func(t *testing.T, raw string, count int8) {
		if len(raw) > 64<<10 {
			t.Skip("input too large")
		}
		node := &api.Node{}
		node.Name = "n"
		node.Annotations = map[string]string{gputopology.AnnotationTopology: raw, "other": "x"}
		before := maps.Clone(node.Annotations)
		ng, perr := gputopology.ParseNodeGPUs(raw)
		want := int64(-1)
		if perr == nil && count > 0 && len(ng.Free) >= int(count) {
			want = 0
			if set := gputopology.PreferredSet(ng.Topology, ng.Free, nil, int(count)); set != nil {
				want = gputopology.SetQuality(ng.Topology, set)
			}
		}
		for i := range 2 { // the second call reads the cache
			score, ok := p.bestSetScore(node, int64(count))
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
