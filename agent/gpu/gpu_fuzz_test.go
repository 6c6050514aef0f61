package gpu

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	"skiff.dev/skiff/api/gputopology"
)

// FuzzProfile: a GPU profile that parses simulates a server of exactly its
// GPUs with a matrix covering them and distinct UUIDs, and encodes to YAML
// that parses to a profile of the same YAML.
func FuzzProfile(f *testing.F) {
	for _, name := range BuiltinProfiles() {
		data, err := builtinFS.ReadFile("profiles/" + name + ".yaml")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("name: x\ngpus: 2\nmodel: {name: T, memoryMiB: 1, computeCapability: \"8.0\"}\nnvlinks: [{gpus: [0, 1], count: 4}]\n"))
	f.Add([]byte("name: x\ngpus: 2\nmodel: {name: T, memoryMiB: 1, computeCapability: \"8.0\"}\nnvlinks: [{gpus: [0, 0], count: -1}]\n"))
	f.Add([]byte("name: x\ngpus: 17\n"))
	f.Add([]byte("name: x\nmock: dgxa100\nnuma: [[0,1,2,3],[4,5,6,7]]\ncpuAffinity: [\"0-63\"]\n"))
	f.Add([]byte("name: x\ngpus: 2\nmodel: {name: T, memoryMiB: 1, computeCapability: \"9\"}\nbusIDs: [\"0000:01:00.0\", \"0000:01:00.0\"]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 16<<10 {
			t.Skip("input too large")
		}
		p, err := ParseProfile(data)
		if err != nil {
			return
		}
		sim, err := NewSim(p, "fuzz", nil)
		if err != nil {
			t.Fatalf("profile parses, does not simulate: %v", err)
		}
		defer sim.Close()
		ctx := context.Background()
		devs, err := sim.Devices(ctx)
		if err != nil || len(devs) != p.Count() {
			t.Fatalf("profile of %d GPUs simulates %d (%v)", p.Count(), len(devs), err)
		}
		topo, err := sim.Topology(ctx)
		if err != nil || topo.N() != p.Count() {
			t.Fatalf("profile of %d GPUs has a matrix of %d (%v)", p.Count(), topo.N(), err)
		}
		uuids := map[string]bool{}
		for _, d := range devs {
			if uuids[d.UUID] {
				t.Fatalf("two simulated GPUs share UUID %s", d.UUID)
			}
			uuids[d.UUID] = true
		}
		out, err := yaml.Marshal(p)
		if err != nil {
			t.Fatalf("encode profile: %v", err)
		}
		again, err := ParseProfile(out)
		if err != nil {
			t.Fatalf("profile written back does not parse: %v\n%s", err, out)
		}
		out2, err := yaml.Marshal(again)
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("profile changes when written back (%v):\n%s\n%s", err, out, out2)
		}
	})
}

// simAnnotation is the topology annotation an agent with profile name
// publishes, with the GPUs of held not free.
func simAnnotation(f *testing.F, name string, held ...int) []byte {
	p, err := BuiltinProfile(name)
	if err != nil {
		f.Fatal(err)
	}
	sim, err := NewSim(p, "fuzz", nil)
	if err != nil {
		f.Fatal(err)
	}
	defer sim.Close()
	devs, _ := sim.Devices(context.Background())
	topo, _ := sim.Topology(context.Background())
	ng := gputopology.NodeGPUs{Topology: topo, Healthy: []int{}, Free: []int{}}
	for _, d := range devs {
		ng.Devices = append(ng.Devices, gputopology.NodeGPU{Index: d.Index, UUID: d.UUID, Name: d.Name, Healthy: true})
		ng.Healthy = append(ng.Healthy, d.Index)
		if !slices.Contains(held, d.Index) {
			ng.Free = append(ng.Free, d.Index)
		}
	}
	b, err := json.Marshal(ng)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// FuzzNodeGPUs: a topology annotation that parses has indexes in range and
// encodes to one that parses the same; for every size up to its free GPUs,
// PreferredSet picks that many distinct free GPUs, whose quality is 0 to
// 100. An allocations annotation parses or fails.
func FuzzNodeGPUs(f *testing.F) {
	f.Add(simAnnotation(f, "dgxa100"), uint8(2))
	f.Add(simAnnotation(f, "dgxh100", 0, 3, 5), uint8(4))
	f.Add(simAnnotation(f, "rtx4090x4", 1), uint8(2))
	f.Add([]byte(`{"devices":[],"topology":null,"healthy":[],"free":[]}`), uint8(1))
	f.Add([]byte(`{"devices":[{"index":0}],"topology":{"links":[[{}]],"numaNodes":[0],"cpuAffinity":[""]},"healthy":[0],"free":[0,0,0]}`), uint8(2))
	f.Add([]byte(`{"devices":[{"index":0}],"free":[1]}`), uint8(1))
	f.Add([]byte(`{"devices":[{"index":0},{"index":1}],"topology":{"links":[[{}],[{},{}]],"numaNodes":[0,0],"cpuAffinity":["",""]},"free":[0,1]}`), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, size uint8) {
		if len(data) > 64<<10 {
			t.Skip("input too large")
		}
		_, _ = gputopology.ParseAllocations(string(data))
		ng, err := gputopology.ParseNodeGPUs(string(data))
		if err != nil {
			return
		}
		n := len(ng.Devices)
		for _, list := range [][]int{ng.Healthy, ng.Free} {
			for _, i := range list {
				if i < 0 || i >= n {
					t.Fatalf("index %d of %d GPUs accepted", i, n)
				}
			}
		}
		b, err := json.Marshal(ng)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		again, err := gputopology.ParseNodeGPUs(string(b))
		if err != nil {
			t.Fatalf("annotation written back does not parse: %v\n%s", err, b)
		}
		b2, _ := json.Marshal(again)
		if string(b) != string(b2) {
			t.Fatalf("annotation changes when written back:\n%s\n%s", b, b2)
		}
		free := slices.Compact(slices.Sorted(slices.Values(ng.Free)))
		k := int(size%17) + 1
		set := gputopology.PreferredSet(ng.Topology, ng.Free, nil, k)
		if k > len(free) {
			if set != nil {
				t.Fatalf("%d of %d free GPUs: got %v", k, len(free), set)
			}
			return
		}
		if len(set) != k || len(slices.Compact(slices.Sorted(slices.Values(set)))) != k {
			t.Fatalf("%d of free %v: got %v", k, free, set)
		}
		for _, i := range set {
			if !slices.Contains(free, i) {
				t.Fatalf("%d of free %v: got %v, with %d not free", k, free, set, i)
			}
		}
		if q := gputopology.SetQuality(ng.Topology, set); q < 0 || q > 100 {
			t.Fatalf("quality %d of %v", q, set)
		}
	})
}
