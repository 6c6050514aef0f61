package gpu

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"skiff.dev/skiff/api/gputopology"
)

// openSim opens a builtin simulated server and closes it after the test.
func openSim(t testing.TB, name string) *Sim {
	t.Helper()
	p, err := BuiltinProfile(name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSim(p, "node-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSimDevices(t *testing.T) {
	tests := []struct {
		profile, name, product, family string
		count                          int
		memoryMiB                      uint64
		nv                             string
	}{
		{"dgxa100", "NVIDIA A100-SXM4-40GB", "NVIDIA-A100-SXM4-40GB", "ampere", 8, 40960, "NV12"},
		{"dgxh100", "NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3", "hopper", 8, 81920, "NV18"},
		{"dgxh200", "NVIDIA H200 141GB HBM3e", "NVIDIA-H200-141GB-HBM3e", "hopper", 8, 144384, "NV18"},
		{"dgxb200", "NVIDIA B200 180GB HBM3e", "NVIDIA-B200-180GB-HBM3e", "blackwell", 8, 184320, "NV18"},
		{"rtx4090x4", "NVIDIA GeForce RTX 4090", "NVIDIA-GeForce-RTX-4090", "ada-lovelace", 4, 24564, "PIX"},
	}
	for _, tt := range tests {
		t.Run(tt.profile, func(t *testing.T) {
			s := openSim(t, tt.profile)
			devs, err := s.Devices(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if len(devs) != tt.count {
				t.Fatalf("got %d GPUs, want %d", len(devs), tt.count)
			}
			buses, uuids := map[string]bool{}, map[string]bool{}
			for i, d := range devs {
				if d.Index != i || d.MinorNumber != i {
					t.Errorf("GPU %d: index %d minor %d", i, d.Index, d.MinorNumber)
				}
				if d.Name != tt.name || d.Product() != tt.product || d.Family != tt.family {
					t.Errorf("GPU %d: name %q product %q family %q", i, d.Name, d.Product(), d.Family)
				}
				if d.MemoryMiB != tt.memoryMiB || d.FreeMiB != tt.memoryMiB {
					t.Errorf("GPU %d: memory %d free %d, want %d", i, d.MemoryMiB, d.FreeMiB, tt.memoryMiB)
				}
				if d.PCIBusID == "" || buses[d.PCIBusID] || !strings.HasPrefix(d.PCIBusID, "00000000:") {
					t.Errorf("GPU %d: bus id %q empty or repeated", i, d.PCIBusID)
				}
				if !strings.HasPrefix(d.UUID, "GPU-") || uuids[d.UUID] {
					t.Errorf("GPU %d: UUID %q", i, d.UUID)
				}
				if !d.Healthy || d.DriverVersion == "" || d.CUDAVersion == "" || d.NUMANode < 0 {
					t.Errorf("GPU %d: %+v", i, d)
				}
				buses[d.PCIBusID], uuids[d.UUID] = true, true
			}
			topo, err := s.Topology(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if got := topo.Link(0, 1).String(); got != tt.nv {
				t.Errorf("link 0-1 = %s, want %s", got, tt.nv)
			}
		})
	}
}

func TestSimUUIDsStablePerNode(t *testing.T) {
	p, _ := BuiltinProfile("dgxa100")
	uuid := func(node string) string {
		s, err := NewSim(p, node, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		devs, _ := s.Devices(t.Context())
		return devs[3].UUID
	}
	first, again, other := uuid("a"), uuid("a"), uuid("b")
	if first != again || first == other {
		t.Fatal("UUIDs must be stable per node and differ between nodes")
	}
}

func TestTopologyMatrixDGXA100(t *testing.T) {
	topo, _ := openSim(t, "dgxa100").Topology(t.Context())
	out := topo.String()
	for _, want := range []string{
		"\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n",
		"GPU0\t X \tNV12\tNV12\tNV12\tNV12\tNV12\tNV12\tNV12\t0-63,128-191\t0\tN/A\n",
		"GPU7\tNV12\tNV12\tNV12\tNV12\tNV12\tNV12\tNV12\t X \t64-127,192-255\t1\tN/A\n",
		"Legend:", "NV#  = Connection traversing a bonded set of # NVLinks",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("topo -m lacks %q:\n%s", want, out)
		}
	}
	// Under the NVLinks, the PCIe view: pairs share a switch, halves a NUMA node.
	for _, tt := range []struct {
		i, j int
		want gputopology.PCIePath
	}{{0, 1, gputopology.PIX}, {2, 3, gputopology.PIX}, {0, 2, gputopology.NODE}, {0, 4, gputopology.SYS}, {6, 7, gputopology.PIX}} {
		if got := topo.Link(tt.i, tt.j).PCIe; got != tt.want {
			t.Errorf("PCIe %d-%d = %v, want %v", tt.i, tt.j, got, tt.want)
		}
	}
}

func TestTopologyRTX4090(t *testing.T) {
	topo, _ := openSim(t, "rtx4090x4").Topology(t.Context())
	want := "GPU0\t X \tPIX\tSYS\tSYS\t0-15,32-47\t0\tN/A\n"
	if out := topo.String(); !strings.Contains(out, want) {
		t.Errorf("got\n%s\nwant a row %q", out, want)
	}
	r := topo.Restrict([]int{2, 3})
	if r.N() != 2 || r.Link(0, 1).PCIe != gputopology.PIX || r.NUMANodes[0] != 1 {
		t.Errorf("restricted: %+v", r)
	}
}

func TestProfiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			p, err := LoadProfile(f)
			valid := strings.HasPrefix(filepath.Base(f), "valid-")
			if valid && err != nil {
				t.Fatal(err)
			}
			if !valid && err == nil {
				t.Fatal("invalid profile accepted")
			}
			if valid {
				s, err := NewSim(p, "n", nil)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
			}
		})
	}
	for _, name := range BuiltinProfiles() {
		if _, err := BuiltinProfile(name); err != nil {
			t.Errorf("builtin %s: %v", name, err)
		}
	}
}

func TestProfileErrorsAllAtOnce(t *testing.T) {
	_, err := LoadProfile("testdata/invalid-many.yaml")
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"model.name: required",
		"model.memoryMiB: required",
		`model.computeCapability: "eight" is not MAJOR.MINOR`,
		`busIDs[1]: "00000000:01:00.0" repeats busIDs[0]`,
		`busIDs[2]: "bogus" is not a PCI bus id`,
		"numa[1][1]: GPU 7 out of range (the profile has 4 GPUs)",
		"numa[1]: GPU 1 is already in numa[0]",
		"cpuAffinity: 1 entries for 2 NUMA nodes",
		"nvlinks[0].gpus: a GPU cannot link to itself",
		"nvlinks[0].count: 40 out of range",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if _, err := ParseProfile([]byte("name: x\ngpus: 1\nmodel: {name: A, memoryMiB: 1, computeCapability: \"9.0\", family: ampere}\ndriverVersion: \"1\"\ncudaVersion: \"12.4\"\n")); err == nil ||
		!strings.Contains(err.Error(), `model.family: "ampere" does not match compute capability 9.0 (hopper)`) {
		t.Errorf("family mismatch: %v", err)
	}
}

func TestValidNVLinkProfile(t *testing.T) {
	p, err := LoadProfile("testdata/valid-rtx3090-nvlink.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSim(p, "n", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	topo, _ := s.Topology(t.Context())
	if l := topo.Link(0, 1); l.NVLinks != 4 || l.PCIe != gputopology.PHB || l.String() != "NV4" {
		t.Errorf("link = %+v", l)
	}
}

func TestFaultInjection(t *testing.T) {
	s := openSim(t, "dgxa100")
	events := s.Watch(t.Context())
	steps := []struct {
		name    string
		do      func() error
		healthy bool
		xid     uint64
	}{
		{"application xid keeps it healthy", func() error { return s.InjectXid(2, 13) }, true, 13},
		{"xid 79 breaks it", func() error { return s.InjectXid(2, 79) }, false, 79},
		{"clear repairs it", func() error { return s.Clear(2) }, true, 0},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if err := st.do(); err != nil {
				t.Fatal(err)
			}
			ev := <-events // buffered: the event is already there
			if ev.Index != 2 || ev.Healthy != st.healthy || ev.Xid != st.xid || ev.UUID == "" || ev.Reason == "" {
				t.Errorf("event %+v", ev)
			}
			devs, _ := s.Devices(t.Context())
			if devs[2].Healthy != st.healthy || devs[2].LastXid != st.xid || !devs[1].Healthy {
				t.Errorf("devices after event: %+v", devs[2])
			}
		})
	}
	if err := s.InjectXid(8, 79); !errors.Is(err, ErrNoSuchGPU) {
		t.Errorf("GPU 8: %v", err)
	}
}

func TestWatchEndsWithContextAndClose(t *testing.T) {
	s := openSim(t, "rtx4090x4")
	ctx, cancel := context.WithCancel(t.Context())
	a, b := s.Watch(ctx), s.Watch(t.Context())
	cancel()
	if _, ok := <-a; ok {
		t.Error("watch a: event after cancel")
	}
	s.Close()
	if _, ok := <-b; ok {
		t.Error("watch b: event after close")
	}
	if _, err := s.Devices(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("Devices after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestMemoryUsed(t *testing.T) {
	s := openSim(t, "dgxa100")
	if err := s.SetMemoryUsed(1, 1000); err != nil {
		t.Fatal(err)
	}
	devs, _ := s.Devices(t.Context())
	if devs[1].FreeMiB != 40960-1000 || devs[0].FreeMiB != 40960 {
		t.Errorf("free = %d, %d", devs[0].FreeMiB, devs[1].FreeMiB)
	}
}

func TestPreferredSet(t *testing.T) {
	rtx, _ := openSim(t, "rtx4090x4").Topology(t.Context())
	a100, _ := openSim(t, "dgxa100").Topology(t.Context())
	tests := []struct {
		name            string
		topo            *gputopology.Topology
		available, must []int
		size            int
		want            []int
	}{
		{"PIX pair over SYS pair", rtx, []int{0, 2, 3}, nil, 2, []int{2, 3}},
		{"PIX pair, all free", rtx, []int{0, 1, 2, 3}, nil, 2, []int{0, 1}},
		{"one GPU keeps a PIX pair whole", rtx, []int{1, 2, 3}, nil, 1, []int{1}},
		{"must is honoured", rtx, []int{0, 1, 2, 3}, []int{2}, 2, []int{2, 3}},
		{"must not available", rtx, []int{0, 1}, []int{2}, 2, nil},
		{"too few", rtx, []int{0}, nil, 2, nil},
		{"dgx: same switch breaks the NV12 tie", a100, []int{0, 2, 4, 5}, nil, 2, []int{4, 5}},
		{"dgx: four in one NUMA node", a100, []int{0, 1, 2, 3, 4, 5, 6, 7}, nil, 4, []int{0, 1, 2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := gputopology.PreferredSet(tt.topo, tt.available, tt.must, tt.size)
			if !slices.Equal(got, tt.want) {
				t.Errorf("PreferredSet = %v, want %v", got, tt.want)
			}
		})
	}
	if gputopology.SetScore(rtx, []int{0, 1}) <= gputopology.SetScore(rtx, []int{0, 2}) {
		t.Error("a PIX pair must score above a SYS pair")
	}
	if gputopology.SetScore(a100, []int{0, 5}) <= gputopology.SetScore(rtx, []int{0, 1}) {
		t.Error("NVLink must score above PCIe")
	}
}

func TestLabels(t *testing.T) {
	devs, _ := openSim(t, "dgxa100").Devices(t.Context())
	got := Labels(devs, true)
	want := map[string]string{
		"nvidia.com/gpu.present":        "true",
		"nvidia.com/gpu.product":        "NVIDIA-A100-SXM4-40GB",
		"nvidia.com/gpu.count":          "8",
		"nvidia.com/gpu.memory":         "40960",
		"nvidia.com/gpu.family":         "ampere",
		"nvidia.com/gpu.compute.major":  "8",
		"nvidia.com/gpu.compute.minor":  "0",
		"nvidia.com/cuda.driver.major":  "550",
		"nvidia.com/cuda.driver.minor":  "54",
		"nvidia.com/cuda.driver.rev":    "15",
		"nvidia.com/cuda.runtime.major": "12",
		"nvidia.com/cuda.runtime.minor": "4",
		"skiff.dev/gpu.simulated":       "true",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("extra labels: %v", got)
	}
	if _, ok := Labels(devs, false)[LabelSimulated]; ok {
		t.Error("real GPUs marked simulated")
	}
	if len(Labels(nil, false)) != 0 {
		t.Error("labels without GPUs")
	}
}

func TestNVMLWithoutDriver(t *testing.T) {
	if _, err := os.Stat("/dev/nvidiactl"); err == nil {
		t.Skip("this machine has an NVIDIA driver")
	}
	_, err := NewNVML(nil)
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("NewNVML = %v, want ErrNoDriver", err)
	}
	src, msg, err := Open("auto", Options{})
	if err != nil || src.Name() != "none" || !strings.Contains(msg, "NVIDIA driver not found") {
		t.Errorf("Open(auto) = %v, %q, %v", src, msg, err)
	}
	if _, _, err := Open("nvml", Options{}); !errors.Is(err, ErrNoDriver) {
		t.Errorf("Open(nvml) = %v", err)
	}
}

func TestOpen(t *testing.T) {
	tests := []struct {
		spec, name, msg string
		simulated, bad  bool
	}{
		{"none", "none", "GPUs: none", false, false},
		{"sim:dgxa100", "sim:dgxa100", "GPUs: 8x NVIDIA A100-SXM4-40GB (simulated, sim:dgxa100, driver 550.54.15, CUDA 12.4)", true, false},
		{"sim:testdata/valid-rtx3090-nvlink.yaml", "sim:rtx3090-nvlink", "2x NVIDIA GeForce RTX 3090", true, false},
		{"sim:nope", "", "", false, true},
		{"sim:testdata/invalid-many.yaml", "", "", false, true},
		{"cuda", "", "", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			src, msg, err := Open(tt.spec, Options{NodeName: "n"})
			if tt.bad {
				if err == nil {
					t.Fatal("accepted")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			if src.Name() != tt.name || src.Simulated() != tt.simulated || !strings.Contains(msg, tt.msg) {
				t.Errorf("got %s simulated=%v %q", src.Name(), src.Simulated(), msg)
			}
		})
	}
}

func TestSysfsBusID(t *testing.T) {
	if got := SysfsBusID("00000000:0F:00.0"); got != "0000:0f:00.0" {
		t.Errorf("got %q", got)
	}
}
