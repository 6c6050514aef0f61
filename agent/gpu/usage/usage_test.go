package usage_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/agent/gpu/usage"
)

// dgx is a simulated DGX A100 and its devices.
func dgx(t *testing.T) (*gpu.Sim, []gpu.Device) {
	t.Helper()
	p, err := gpu.BuiltinProfile("dgxa100")
	if err != nil {
		t.Fatal(err)
	}
	s, err := gpu.NewSim(p, "node-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	devs, err := s.Devices(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return s, devs
}

func meter(t *testing.T, src gpu.Source, root string, layout []gpu.SubDevice, holders map[string]usage.Holder) *usage.Meter {
	t.Helper()
	if err := usage.PrepareDirs(root, layout); err != nil {
		t.Fatal(err)
	}
	m, err := usage.New(usage.Config{Source: src, Root: root,
		Layout:  func() []gpu.SubDevice { return layout },
		Holders: func() map[string]usage.Holder { return holders }})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func hold(t *testing.T, root string, d gpu.SubDevice, util int, mem uint64) *usage.Held {
	t.Helper()
	h, err := usage.Hold(root, d, util, mem)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Release)
	return h
}

func device(t *testing.T, s *usage.Sample, id string) usage.DeviceSample {
	t.Helper()
	for _, g := range s.GPUs {
		for _, d := range g.Devices {
			if d.ID == id {
				return d
			}
		}
	}
	t.Fatalf("no device %s in the sample", id)
	return usage.DeviceSample{}
}

// TestTimeSlicingShares: loads on replicas of one GPU share its SMs (60 %
// and 90 % asked: 40 % and 60 % got, the GPU at 100 %) and its memory,
// and a neighbour can take the memory another one wanted.
func TestTimeSlicingShares(t *testing.T) {
	s, devs := dgx(t)
	root := t.TempDir()
	layout, _ := gpu.Replicas(devs, gpu.SharingTimeSlicing, 4, "nvidia.com/gpu")
	holders := map[string]usage.Holder{layout[0].ID: {Namespace: "ns", Pod: "a", Container: "c"}}
	m := meter(t, s, root, layout, holders)
	hold(t, root, layout[0], 60, 30000)
	hold(t, root, layout[1], 90, 8000)
	smp, err := m.Sample(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	g := smp.GPUs[0]
	if g.UtilPercent != 100 || g.MemoryUsedMiB != 38000 || g.MemoryFreeMiB != 40960-38000 {
		t.Errorf("GPU 0: util %d%%, used %d free %d; want 100%%, 38000, 2960", g.UtilPercent, g.MemoryUsedMiB, g.MemoryFreeMiB)
	}
	a, b := device(t, smp, layout[0].ID), device(t, smp, layout[1].ID)
	if a.UtilPercent != 40 || b.UtilPercent != 60 {
		t.Errorf("replicas got %d%% and %d%%, want 40 and 60 (60:90 of 100)", a.UtilPercent, b.UtilPercent)
	}
	if a.MemoryTotalMiB != 40960 || a.MemoryFreeMiB != 2960 {
		t.Errorf("a replica sees %d MiB with %d free, want the whole GPU's 40960 with 2960 free", a.MemoryTotalMiB, a.MemoryFreeMiB)
	}
	if a.Holder == nil || a.Holder.Pod != "a" || b.Holder != nil {
		t.Errorf("holders %v %v", a.Holder, b.Holder)
	}
	if g.PowerW != 400 || g.TemperatureC != usage.TemperatureC(0, 100) || g.SMClockMHz != 1410 || g.MemCopyUtilPercent != 60 {
		t.Errorf("GPU 0 at 100%%: %.0f W, %d °C, %d MHz, copy %d%%", g.PowerW, g.TemperatureC, g.SMClockMHz, g.MemCopyUtilPercent)
	}
	if idle := smp.GPUs[1]; idle.UtilPercent != 0 || idle.PowerW != 60 || idle.SMClockMHz != usage.IdleSMClockMHz {
		t.Errorf("idle GPU 1: %d%% %.0f W %d MHz", idle.UtilPercent, idle.PowerW, idle.SMClockMHz)
	}
	// The neighbour pushed the third one out of memory.
	_, err = usage.Hold(root, layout[2], 10, 4000)
	if !errors.Is(err, usage.ErrOutOfMemory) {
		t.Errorf("third replica's 4000 MiB with 2960 free: %v, want out of memory", err)
	}
}

// TestMPSCapsAndLimits: an MPS share gets at most its SM percentage and
// cannot allocate past its pinned limit, whatever the GPU has free.
func TestMPSCapsAndLimits(t *testing.T) {
	s, devs := dgx(t)
	root := t.TempDir()
	layout, _ := gpu.Replicas(devs, gpu.SharingMPS, 4, "nvidia.com/gpu")
	m := meter(t, s, root, layout, nil)
	hold(t, root, layout[0], 90, 1000)
	hold(t, root, layout[1], 10, 1000)
	smp, err := m.Sample(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if a := device(t, smp, layout[0].ID); a.UtilPercent != 25 || a.MemoryTotalMiB != 10240 || a.MemoryFreeMiB != 9240 {
		t.Errorf("MPS share: %d%% of the SMs, %d MiB with %d free; want 25%%, 10240, 9240", a.UtilPercent, a.MemoryTotalMiB, a.MemoryFreeMiB)
	}
	if g := smp.GPUs[0]; g.UtilPercent != 35 {
		t.Errorf("GPU util %d%%, want 25+10", g.UtilPercent)
	}
	if _, err := usage.Hold(root, layout[2], 10, 10241); !errors.Is(err, usage.ErrOutOfMemory) {
		t.Errorf("10241 MiB in a 10240 MiB share: %v", err)
	}
}

// TestMIGIsolates: loads on two MIG devices of one GPU do not share; each
// device's numbers are its own, the GPU's the sum over its slices.
func TestMIGIsolates(t *testing.T) {
	s, devs := dgx(t)
	root := t.TempDir()
	mig := func(i int) gpu.SubDevice {
		u := "MIG-0000000" + string(rune('0'+i)) + "-aaaa-bbbb-cccc-dddddddddddd"
		return gpu.SubDevice{ID: u, Sharing: gpu.SharingMIG, Resource: "nvidia.com/mig-1g.5gb",
			ParentIndex: 0, ParentUUID: devs[0].UUID, Domain: u, DomainMiB: 4864, MemoryMiB: 4864, SMPercent: 100,
			MIG: &gpu.MIGDevice{UUID: u, Profile: "1g.5gb", Index: i, Slices: 1, Size: 1, MemoryMiB: 4864}}
	}
	layout := append([]gpu.SubDevice{mig(0), mig(1)}, gpu.WholeGPUs(devs[1:], "nvidia.com/gpu")...)
	m := meter(t, s, root, layout, nil)
	hold(t, root, layout[0], 100, 4000)
	hold(t, root, layout[1], 70, 4864)
	smp, err := m.Sample(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	a, b := device(t, smp, layout[0].ID), device(t, smp, layout[1].ID)
	if a.UtilPercent != 100 || b.UtilPercent != 70 || a.MemoryFreeMiB != 864 || b.MemoryFreeMiB != 0 {
		t.Errorf("MIG devices: %d%%/%d free, %d%%/%d free", a.UtilPercent, a.MemoryFreeMiB, b.UtilPercent, b.MemoryFreeMiB)
	}
	if g := smp.GPUs[0]; g.UtilPercent != (100+70)/7 || g.MemoryUsedMiB != 8864 {
		t.Errorf("GPU 0: %d%% %d MiB, want %d%% 8864", g.UtilPercent, g.MemoryUsedMiB, (100+70)/7)
	}
	if _, err := usage.Hold(root, layout[1], 1, 1); !errors.Is(err, usage.ErrOutOfMemory) {
		t.Errorf("a full MIG device took more: %v", err)
	}
}

// TestDeadLoadDisappears: a load whose process is killed (its fifo closes
// without it removing anything) is gone at the next sample, and its files
// with it; a damaged record or a link in the directory is never read.
func TestDeadLoadDisappears(t *testing.T) {
	s, devs := dgx(t)
	root := t.TempDir()
	layout := gpu.WholeGPUs(devs, "nvidia.com/gpu")
	m := meter(t, s, root, layout, nil)
	h := hold(t, root, layout[0], 50, 100)
	dir := usage.DomainDir(root, layout[0].Domain)
	os.WriteFile(filepath.Join(dir, "junk.load"), []byte("DEVICE=x\nUTIL=900\n"), 0o644)
	os.Symlink("/etc/passwd", filepath.Join(dir, "link.load"))
	smp, _ := m.Sample(t.Context())
	if g := smp.GPUs[0]; g.UtilPercent != 50 {
		t.Fatalf("util %d, want 50", g.UtilPercent)
	}
	h.Kill()
	smp, _ = m.Sample(t.Context())
	if g := smp.GPUs[0]; g.UtilPercent != 0 || g.MemoryUsedMiB != 0 {
		t.Errorf("after kill: %d%% %d MiB", g.UtilPercent, g.MemoryUsedMiB)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 0 {
		var names []string
		for _, e := range left {
			names = append(names, e.Name())
		}
		t.Errorf("files left: %v", names)
	}
	if _, err := os.Stat("/etc/passwd"); err != nil {
		t.Errorf("the link's target: %v", err)
	}
}

func TestParseLoadStrict(t *testing.T) {
	for _, bad := range []string{
		"DEVICE=a\nUTIL=1\nMEM=1\n",
		"DEVICE=a\nUTIL=101\nMEM=1\nSM=1\n",
		"DEVICE=a\nUTIL=1\nMEM=-1\nSM=1\n",
		"DEVICE=a\nUTIL=1\nMEM=1\nSM=1\nX=1\n",
		"DEVICE=a\nDEVICE=b\nUTIL=1\nMEM=1\nSM=1\n",
	} {
		if _, err := usage.ParseLoad("t", []byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	l := usage.Load{Token: "t", Device: "GPU-x::1", UtilPercent: 5, MemoryMiB: 7, SMPercent: 25}
	if got, err := usage.ParseLoad("t", usage.FormatLoad(l)); err != nil || got != l {
		t.Errorf("round trip: %+v %v", got, err)
	}
}
