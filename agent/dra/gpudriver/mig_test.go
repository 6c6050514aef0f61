package gpudriver_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"skiff.dev/skiff/agent/dra/gpudriver"
	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/agent/gpu/cdi"
	"skiff.dev/skiff/api"
)

var update = flag.Bool("update", false, "rewrite testdata/dgxa100-dynamic-mig.yaml")

// migGolden is the pool a simulated DGX A100 publishes with DynamicMIG;
// controlplane/scheduler's TestDynamicMIGAllocation runs the allocator
// over it.
const migGolden = "testdata/dgxa100-dynamic-mig.yaml"

// setUpMIG is setUp with DynamicMIG on (the simulated GPUs' CDI spec
// written first, as the agent does).
func setUpMIG(t *testing.T, objs ...api.Object) (*fixture, gpudriver.Config) {
	t.Helper()
	f := setUp(t, objs...)
	cfg := f.migConfig(t)
	d, err := gpudriver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.d = d
	return f, cfg
}

func (f *fixture) migConfig(t *testing.T) gpudriver.Config {
	t.Helper()
	sim := cdi.Config{NodeName: node, SpecDir: f.cdiDir, DataDir: filepath.Join(f.dir, "gpu")}
	topo, err := f.src.Topology(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cdi.WriteSimSpec(sim, f.devs, nil, topo); err != nil {
		t.Fatal(err)
	}
	cfg := f.config()
	cfg.DynamicMIG, cfg.SimCDI = true, &sim
	return cfg
}

// poolSlices lists the node's slices of the driver, by name.
func poolSlices(t *testing.T, f *fixture) map[string]*api.ResourceSlice {
	t.Helper()
	objs, _, err := f.c.List(context.Background(), api.MustKindOf(&api.ResourceSlice{}), "", api.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*api.ResourceSlice{}
	for _, o := range objs {
		s := o.(*api.ResourceSlice)
		out[s.Name] = s
	}
	return out
}

func counter(t *testing.T, cs []api.DeviceCounterConsumption, name string) int64 {
	t.Helper()
	if len(cs) != 1 {
		t.Fatalf("consumesCounters %+v, want one set", cs)
	}
	c, ok := cs[0].Counters[name]
	if !ok {
		return -1
	}
	return c.Value.Value()
}

// The pool with DynamicMIG: the main slice (no whole GPUs left in it), one
// slice of eight counter sets, one slice per GPU with the whole GPU and
// its 25 placements; every slice valid, one generation, the count right.
func TestDynamicMIGSlices(t *testing.T) {
	f, _ := setUpMIG(t)
	ctx := context.Background()
	if err := f.d.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	got := poolSlices(t, f)
	base := gpudriver.SliceName(node)
	if len(got) != 10 || got[base] == nil || got[base+"-counters"] == nil || got[base+"-gpu-0"] == nil {
		t.Fatalf("slices %v, want %s, -counters and -gpu-0..7", slices.Sorted(func(y func(string) bool) {
			for n := range got {
				if !y(n) {
					return
				}
			}
		}), base)
	}
	for name, s := range got {
		if err := api.Validate(s); err != nil {
			t.Errorf("slice %s does not validate: %v", name, err)
		}
		if s.Spec.Pool.Generation != 1 || s.Spec.Pool.ResourceSliceCount != 10 || s.Spec.Pool.Name != node {
			t.Errorf("slice %s: pool %+v, want generation 1 of 10 slices", name, s.Spec.Pool)
		}
	}
	if n := len(got[base].Spec.Devices); n != 0 {
		t.Errorf("main slice has %d devices, want none (every GPU is partitionable)", n)
	}
	sets := got[base+"-counters"].Spec.SharedCounters
	if len(sets) != 8 || sets[0].Name != "gpu-0-counter-set" {
		t.Fatalf("counter sets %+v", sets)
	}
	set := sets[0].Counters
	for name, want := range map[string]int64{"multiprocessors": 98, "memory-slice-0": 1, "memory-slice-7": 1, "ofa-engines": 1, "memory": 40192 << 20} {
		if c, ok := set[name]; !ok || c.Value.Value() != want {
			t.Errorf("counter %s = %v, want %d", name, c.Value, want)
		}
	}
	devs := got[base+"-gpu-0"].Spec.Devices
	byName := map[string]api.Device{}
	for _, d := range devs {
		byName[d.Name] = d
	}
	if len(devs) != 26 || devs[0].Name != "gpu-0" {
		t.Fatalf("gpu-0's slice: %d devices, first %s; want 26, gpu-0 first", len(devs), devs[0].Name)
	}
	if n := counter(t, devs[0].ConsumesCounters, "memory-slice-7"); n != 1 || attr(t, devs[0], "type") != "gpu" {
		t.Errorf("whole gpu-0: type %s, memory-slice-7 %d; want a gpu consuming every slice", attr(t, devs[0], "type"), n)
	}
	mig, ok := byName["gpu-0-mig-1g5gb-19-1"]
	if !ok {
		t.Fatalf("no gpu-0-mig-1g5gb-19-1 in %v", slices.Collect(func(y func(string) bool) {
			for _, d := range devs {
				y(d.Name)
			}
		}))
	}
	for name, want := range map[string]string{"type": "mig", "profile": "1g.5gb", "parentUUID": f.devs[0].UUID,
		"productName": "NVIDIA A100-SXM4-40GB", "uuid": "<none>"} {
		if got := attr(t, mig, name); got != want {
			t.Errorf("gpu-0-mig-1g5gb-19-1 %s = %q, want %q", name, got, want)
		}
	}
	for name, want := range map[string]int64{"memory-slice-1": 1, "memory-slice-0": -1, "multiprocessors": 14} {
		if n := counter(t, mig.ConsumesCounters, name); n != want {
			t.Errorf("gpu-0-mig-1g5gb-19-1 consumes %s %d, want %d", name, n, want)
		}
	}
	if c := mig.Capacity["memory"]; c.Value.Value() != 4864<<20 {
		t.Errorf("gpu-0-mig-1g5gb-19-1 memory %v, want 4864Mi", c.Value)
	}
	for _, name := range []string{"gpu-0-mig-3g20gb-9-4", "gpu-0-mig-7g40gb-0-0", "gpu-0-mig-1g5gb-me-20-6", "gpu-0-mig-2g10gb-14-4"} {
		if _, ok := byName[name]; !ok {
			t.Errorf("no device %s", name)
		}
	}
	if n := counter(t, byName["gpu-0-mig-3g20gb-9-4"].ConsumesCounters, "memory-slice-7"); n != 1 {
		t.Errorf("3g.20gb at 4 consumes memory-slice-7 %d, want 1", n)
	}
	// Published again unchanged: no new generation.
	if err := f.d.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	if g := poolSlices(t, f)[base+"-gpu-3"].Spec.Pool.Generation; g != 1 {
		t.Errorf("unchanged pool republished: generation %d", g)
	}
	// A fault takes gpu-5's slice and counter set out, in a new generation.
	if err := f.faults.InjectXid(5, 79); err != nil {
		t.Fatal(err)
	}
	if err := f.d.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	after := poolSlices(t, f)
	if _, ok := after[base+"-gpu-5"]; ok || len(after) != 9 || len(after[base+"-counters"].Spec.SharedCounters) != 7 {
		t.Errorf("after gpu-5's fault: %d slices, %d counter sets", len(after), len(after[base+"-counters"].Spec.SharedCounters))
	}
	for name, s := range after {
		if s.Spec.Pool.Generation != 2 || s.Spec.Pool.ResourceSliceCount != 9 {
			t.Errorf("slice %s after the fault: pool %+v, want generation 2 of 9", name, s.Spec.Pool)
		}
	}

	// The golden pool (before the fault), cut to GPUs 0 and 1 to stay
	// small: their counter sets and their slices, a pool of 3.
	counters := got[base+"-counters"].Spec
	counters.SharedCounters = counters.SharedCounters[:2]
	pool := []api.ResourceSliceSpec{counters, got[base+"-gpu-0"].Spec, got[base+"-gpu-1"].Spec}
	for i := range pool {
		pool[i].Pool.ResourceSliceCount = int64(len(pool))
	}
	b, err := yaml.Marshal(pool)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(migGolden, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(migGolden)
	if err != nil {
		t.Fatalf("%v (go test -run TestDynamicMIGSlices -update writes it)", err)
	}
	if string(want) != string(b) {
		t.Errorf("the pool differs from %s (go test -run TestDynamicMIGSlices -update, and check the diff)", migGolden)
	}
}

// migClaim is an allocated claim of MIG devices, one request each.
func migClaim(name, uid string, devices ...string) *api.ResourceClaim {
	c := claim(name, uid, node, devices...)
	for i := range c.Status.Allocation.Devices.Results {
		c.Status.Allocation.Devices.Results[i].Request = "mig" + string(rune('0'+i))
	}
	return c
}

// Prepare creates the MIG device on the simulated GPU and a CDI device
// whose record is that MIG device; a claim overlapping a prepared one is
// refused; the inventory holds the GPU; Unprepare destroys the device; a
// restarted driver re-creates what its checkpoint holds.
func TestDynamicMIGPrepareUnprepare(t *testing.T) {
	f, cfg := setUpMIG(t,
		migClaim("a", "uid-a", "gpu-0-mig-1g5gb-19-0"),
		migClaim("b", "uid-b", "gpu-0-mig-1g5gb-19-1", "gpu-0-mig-3g20gb-9-4"),
		migClaim("overlap", "uid-o", "gpu-0-mig-2g10gb-14-0"),
		claim("whole", "uid-w", node, "gpu-0"),
		migClaim("elsewhere", "uid-e", "gpu-1-mig-2g10gb-14-0"))
	ctx := context.Background()
	mp := f.src.(gpu.MIGPartitioner)
	migs := func(index int) []string {
		t.Helper()
		all, err := mp.MIGDevices(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range all[index] {
			out = append(out, m.Profile+"@"+string(rune('0'+m.Start)))
		}
		slices.Sort(out)
		return out
	}
	a := gpudriver.ClaimRef{Namespace: "default", Name: "a", UID: "uid-a"}
	got, err := f.d.Prepare(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !slices.Equal(got[0].CDIDeviceIDs, []string{cdi.ClaimDeviceName("uid-a", "gpu-0-mig-1g5gb-19-0")}) {
		t.Fatalf("prepared %+v, want the claim's own CDI device only", got)
	}
	if m := migs(0); !slices.Equal(m, []string{"1g.5gb@0"}) {
		t.Fatalf("MIG devices of GPU 0 after prepare: %v", m)
	}
	all, _ := mp.MIGDevices(ctx)
	uuidA := all[0][0].UUID
	// The claim's CDI device is the MIG device: its record, its GPU's node.
	spec, err := os.ReadFile(filepath.Join(f.cdiDir, cdi.ClaimSpecName("uid-a")))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"gpu-00-mig0.env", "/dev/nvidia0", "DRA_CLAIM_GPU_0_MIG_1G5GB_19_0=default/a/" + uuidA, cdi.ScriptPath, uuidA} {
		if !strings.Contains(string(spec), want) {
			t.Errorf("claim spec lacks %q:\n%s", want, spec)
		}
	}
	rec, err := os.ReadFile(filepath.Join(f.dir, "gpu", node, "devices", "gpu-00-mig0.env"))
	if err != nil || !strings.Contains(string(rec), uuidA) || !strings.Contains(string(rec), "1g.5gb") {
		t.Errorf("MIG record (%v):\n%s", err, rec)
	}
	if h := f.d.Held(); h[f.devs[0].UUID] != "claim default/a" {
		t.Errorf("held %v, want GPU 0 held by claim default/a", h)
	}
	if own := f.d.MIGDeviceUUIDs(); !own[uuidA] || len(own) != 1 {
		t.Errorf("driver's MIG devices %v, want %s", own, uuidA)
	}
	// A second claim on the same GPU at other memory slices is fine.
	if _, err := f.d.Prepare(ctx, gpudriver.ClaimRef{Namespace: "default", Name: "b", UID: "uid-b"}); err != nil {
		t.Fatal(err)
	}
	if m := migs(0); !slices.Equal(m, []string{"1g.5gb@0", "1g.5gb@1", "3g.20gb@4"}) {
		t.Errorf("MIG devices of GPU 0: %v", m)
	}
	// Overlapping ones are refused before anything is created.
	for _, tc := range []struct{ claim, uid, want string }{
		{"overlap", "uid-o", "MIG device gpu-0-mig-2g10gb-14-0 overlaps a device of GPU " + f.devs[0].UUID + " that is held by claim default/"},
		{"whole", "uid-w", "is held by claim default/"},
	} {
		if _, err := f.d.Prepare(ctx, gpudriver.ClaimRef{Namespace: "default", Name: tc.claim, UID: tc.uid}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("prepare %s: %v, want %q", tc.claim, err, tc.want)
		}
	}
	if m := migs(0); len(m) != 3 {
		t.Errorf("MIG devices of GPU 0 after refused prepares: %v", m)
	}
	// The device plugin holding GPU 1 keeps DRA off all of it.
	f.byPlugin[f.devs[1].UUID] = "default/dp"
	if _, err := f.d.Prepare(ctx, gpudriver.ClaimRef{Namespace: "default", Name: "elsewhere", UID: "uid-e"}); err == nil || !strings.Contains(err.Error(), "through nvidia.com/gpu") {
		t.Errorf("prepare on the device plugin's GPU: %v", err)
	}
	if m := migs(1); len(m) != 0 {
		t.Errorf("MIG devices made on the device plugin's GPU: %v", m)
	}
	// Restart: the simulated GPU forgot the devices; the checkpoint has them.
	for _, m := range all[0] {
		_ = mp.DestroyMIGDevice(0, m.UUID)
	}
	for _, uuid := range []string{uuidA} {
		_ = mp.DestroyMIGDevice(0, uuid)
	}
	restarted, err := gpudriver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if m := migs(0); !slices.Equal(m, []string{"1g.5gb@0", "1g.5gb@1", "3g.20gb@4"}) {
		t.Errorf("MIG devices of GPU 0 after restart: %v", m)
	}
	if err := restarted.Unprepare(ctx, a); err != nil {
		t.Fatal(err)
	}
	if m := migs(0); !slices.Equal(m, []string{"1g.5gb@1", "3g.20gb@4"}) {
		t.Errorf("MIG devices of GPU 0 after unprepare of a: %v", m)
	}
	if err := restarted.Unprepare(ctx, gpudriver.ClaimRef{Namespace: "default", Name: "b", UID: "uid-b"}); err != nil {
		t.Fatal(err)
	}
	if all, _ := mp.MIGDevices(ctx); len(all) != 0 {
		t.Errorf("MIG devices after every claim was unprepared: %v (MIG mode stays on?)", all)
	}
	if h := restarted.Held(); len(h) != 0 {
		t.Errorf("held after unprepare: %v", h)
	}
}

// migless hides the simulator's MIG methods: a Source skiff cannot
// partition (as real NVML).
type migless struct{ gpu.Source }

func TestDynamicMIGRefused(t *testing.T) {
	f := setUp(t, migClaim("a", "uid-a", "gpu-0-mig-1g5gb-19-0"))
	cfg := f.migConfig(t)
	cfg.Source = migless{f.src}
	if _, err := gpudriver.New(cfg); err == nil || !strings.Contains(err.Error(), "DynamicMIG: skiff cannot create MIG devices on the GPUs of sim:dgxa100") {
		t.Errorf("DynamicMIG over a Source without MIG creation: %v", err)
	}
	// Without DynamicMIG a MIG device is not created.
	_, err := f.d.Prepare(context.Background(), gpudriver.ClaimRef{Namespace: "default", Name: "a", UID: "uid-a"})
	if err == nil || !strings.Contains(err.Error(), "this node does not create MIG devices") {
		t.Errorf("prepare of a MIG device without DynamicMIG: %v", err)
	}
	if all, _ := f.src.(gpu.MIGSource).MIGDevices(context.Background()); len(all) != 0 {
		t.Errorf("MIG devices made: %v", all)
	}
}
