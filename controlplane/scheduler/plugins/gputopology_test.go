package plugins

import (
	"encoding/json"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/gputopology"
)

// A node of four GPUs: 0-1 joined by NV4, 2-3 on one PCIe switch (PIX),
// everything else across sockets (SYS).
func topoNode(t testing.TB, name string, free []int) *api.Node {
	t.Helper()
	topo := gputopology.NewTopology(4)
	for i := range 4 {
		for j := i + 1; j < 4; j++ {
			topo.Set(i, j, gputopology.Link{PCIe: gputopology.SYS})
		}
	}
	topo.Set(0, 1, gputopology.Link{NVLinks: 4, PCIe: gputopology.SYS})
	topo.Set(2, 3, gputopology.Link{PCIe: gputopology.PIX})
	ng := gputopology.NodeGPUs{Topology: topo, Healthy: []int{0, 1, 2, 3}, Free: free}
	for i := range 4 {
		ng.Devices = append(ng.Devices, gputopology.NodeGPU{Index: i, UUID: "GPU-" + string(rune('a'+i)), Healthy: true})
	}
	b, err := json.Marshal(ng)
	if err != nil {
		t.Fatal(err)
	}
	n := &api.Node{}
	n.Name = name
	n.Annotations = map[string]string{gputopology.AnnotationTopology: string(b)}
	return n
}

func TestGPUTopologyAnnotation(t *testing.T) {
	p := NewGPUTopology()
	bad := &api.Node{}
	bad.Name, bad.Annotations = "bad", map[string]string{gputopology.AnnotationTopology: "{"}
	for _, tc := range []struct {
		name   string
		node   *api.Node
		count  int64
		want   int64
		wantOK bool
	}{
		{"no annotation", &api.Node{}, 2, 0, false},
		{"unparsable", bad, 2, 0, false},
		{"pair over NVLink", topoNode(t, "a", []int{0, 1, 2, 3}), 2, 100, true},
		{"NVLink pair busy: PIX pair", topoNode(t, "b", []int{0, 2, 3}), 2, 50, true},
		{"only SYS pairs", topoNode(t, "c", []int{0, 2}), 2, 10, true},
		{"one GPU", topoNode(t, "d", []int{3}), 1, 100, true},
		{"too few free", topoNode(t, "e", []int{3}), 2, 0, true},
		{"four: mean of capped pairs", topoNode(t, "f", []int{0, 1, 2, 3}), 4, (100 + 50 + 4*10) / 6, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 2 { // the second call reads the cache
				got, ok := p.bestSetScore(tc.node, tc.count)
				if got != tc.want || ok != tc.wantOK {
					t.Fatalf("bestSetScore = %d, %v; want %d, %v", got, ok, tc.want, tc.wantOK)
				}
			}
		})
	}
}
