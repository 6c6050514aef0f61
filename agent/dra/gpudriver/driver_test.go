package gpudriver_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/agent/dra"
	"skiff.dev/skiff/agent/dra/gpudriver"
	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/agent/gpu/cdi"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/gputopology"
	"skiff.dev/skiff/client/fake"
	"skiff.dev/skiff/internal/testwait"
)

const node = "n1"

type fixture struct {
	src      gpu.Source
	faults   gpu.FaultInjector
	devs     []gpu.Device
	dir      string // short: unix socket paths are limited to 107 bytes
	cdiDir   string
	c        *fake.Client
	byPlugin map[string]string
	d        *gpudriver.Driver
}

// setUp builds a driver over a simulated DGX A100 with a fake API.
func setUp(t testing.TB, objs ...api.Object) *fixture {
	t.Helper()
	dir, err := os.MkdirTemp("", "dra")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	src, _, err := gpu.Open("sim:dgxa100", gpu.Options{NodeName: node})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	devs, err := src.Devices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{src: src, faults: src.(gpu.FaultInjector), devs: devs, dir: dir, cdiDir: filepath.Join(dir, "cdi"),
		c: fake.New(objs...), byPlugin: map[string]string{}}
	f.d = f.newDriver(t)
	return f
}

func (f *fixture) newDriver(t testing.TB) *gpudriver.Driver {
	t.Helper()
	d, err := gpudriver.New(f.config())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (f *fixture) config() gpudriver.Config {
	return gpudriver.Config{
		Source: f.src, NodeName: node, Client: f.c,
		Dir: filepath.Join(f.dir, "p"), RegistryDir: filepath.Join(f.dir, "r"), CDISpecDir: f.cdiDir,
		HeldByDevicePlugin: func() map[string]string { return f.byPlugin },
	}
}

// claim is an allocated claim of devices on pool, reserved for pod uid "pod-1".
func claim(name, uid, pool string, devices ...string) *api.ResourceClaim {
	c := &api.ResourceClaim{
		TypeMeta:   api.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaim"},
		ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default", UID: uid},
		Spec: api.ResourceClaimSpec{Devices: api.DeviceClaim{Requests: []api.DeviceRequest{{
			Name: "gpus", Exactly: &api.ExactDeviceRequest{DeviceClassName: api.NVIDIAGPUDeviceClassName, Count: int64(len(devices))}}}}},
	}
	if pool == "" {
		return c
	}
	c.Status.Allocation = &api.AllocationResult{}
	for _, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			api.DeviceRequestAllocationResult{Request: "gpus", Driver: gpudriver.DriverName, Pool: pool, Device: d})
	}
	c.Status.ReservedFor = []api.ResourceClaimConsumerReference{{Resource: "pods", Name: "p1", UID: "pod-1"}}
	return c
}

func attr(t *testing.T, d api.Device, name string) string {
	t.Helper()
	a, ok := d.Attributes[name]
	switch {
	case !ok:
		return "<none>"
	case a.StringValue != nil:
		return *a.StringValue
	case a.VersionValue != nil:
		return "v" + *a.VersionValue
	case a.IntValue != nil:
		return strconv.FormatInt(*a.IntValue, 10)
	}
	return "<empty>"
}

func TestSliceDevicesOfDGXA100(t *testing.T) {
	f := setUp(t)
	devs, err := f.d.SliceDevices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 8 {
		t.Fatalf("%d devices, want 8", len(devs))
	}
	g0 := f.devs[0]
	d0 := devs[0]
	for _, tc := range []struct{ attr, want string }{
		{"type", "gpu"},
		{"uuid", g0.UUID},
		{"index", "0"},
		{"minor", strconv.Itoa(g0.MinorNumber)},
		{"productName", "NVIDIA A100-SXM4-40GB"},
		{"brand", "Nvidia"},
		{"architecture", "Ampere"},
		{"cudaComputeCapability", "v8.0.0"},
		{"driverVersion", "v" + mustSemver(t, g0.DriverVersion)},
		{"cudaDriverVersion", "v" + mustSemver(t, g0.CUDAVersion)},
		{gpudriver.AttrPCIBusID, "0000:07:00.0"},
		{gpudriver.AttrPCIeRoot, "pci0000:00"},
		{"addressingMode", "None"},
		{gpudriver.AttrNVLinkDomain, "0"},
		{gpudriver.AttrClique, "<none>"},
	} {
		if got := attr(t, d0, tc.attr); got != tc.want {
			t.Errorf("gpu-0 %s = %q, want %q", tc.attr, got, tc.want)
		}
	}
	if d0.Name != "gpu-"+strconv.Itoa(g0.MinorNumber) {
		t.Errorf("name %q", d0.Name)
	}
	if m := d0.Capacity["memory"].Value; m.String() != "40Gi" {
		t.Errorf("memory %s, want 40Gi", m.String())
	}
	// Pairs share a PCIe switch, so a root; NVSwitch joins all eight.
	for i, d := range devs {
		if got, want := attr(t, d, gpudriver.AttrPCIeRoot), attr(t, devs[i/2*2], gpudriver.AttrPCIeRoot); got != want {
			t.Errorf("%s pcieRoot %s, want its pair's %s", d.Name, got, want)
		}
		if got := attr(t, d, gpudriver.AttrNVLinkDomain); got != "0" {
			t.Errorf("%s nvlinkDomain %s, want 0", d.Name, got)
		}
		if n := len(d.Attributes) + len(d.Capacity); n > api.ResourceSliceMaxAttributesAndCapacitiesPerDevice {
			t.Errorf("%s has %d attributes and capacities, more than %d", d.Name, n, api.ResourceSliceMaxAttributesAndCapacitiesPerDevice)
		}
	}
	if attr(t, devs[0], gpudriver.AttrPCIeRoot) == attr(t, devs[2], gpudriver.AttrPCIeRoot) {
		t.Errorf("gpu-0 and gpu-2 share pcieRoot %s, want different", attr(t, devs[0], gpudriver.AttrPCIeRoot))
	}
}

func mustSemver(t *testing.T, v string) string {
	t.Helper()
	parts := strings.Split(v, ".")
	for len(parts) < 3 {
		parts = append(parts, "0")
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			t.Fatalf("version %q: %v", v, err)
		}
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ".")
}

func TestNVLinkDomainsAndClique(t *testing.T) {
	gpus := make([]gpu.Device, 4)
	for i := range gpus {
		gpus[i] = gpu.Device{Index: i, MinorNumber: i, UUID: "GPU-" + strconv.Itoa(i), Name: "NVIDIA RTX", Healthy: true}
	}
	pairs := gputopology.NewTopology(4)
	pairs.Set(0, 1, gputopology.Link{NVLinks: 4, PCIe: gputopology.SYS})
	pairs.Set(2, 3, gputopology.Link{NVLinks: 4, PCIe: gputopology.SYS})
	none := gputopology.NewTopology(4)
	for _, tc := range []struct {
		name   string
		topo   *gputopology.Topology
		clique string
		want   []string
	}{
		{"bridged pairs", pairs, "", []string{"0", "0", "1", "1"}},
		{"no NVLink", none, "", []string{"<none>", "<none>", "<none>", "<none>"}},
		{"clique", pairs, "cluster-a.1", []string{"0", "0", "1", "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			devs := gpudriver.Devices(gpus, tc.topo, true, tc.clique)
			for i, d := range devs {
				if got := attr(t, d, gpudriver.AttrNVLinkDomain); got != tc.want[i] {
					t.Errorf("%s nvlinkDomain %s, want %s", d.Name, got, tc.want[i])
				}
				wantClique := tc.clique
				if wantClique == "" {
					wantClique = "<none>"
				}
				if got := attr(t, d, gpudriver.AttrClique); got != wantClique {
					t.Errorf("%s clique %s, want %s", d.Name, got, wantClique)
				}
			}
		})
	}
}

func TestPrepareUnprepare(t *testing.T) {
	f := setUp(t, claim("two", "uid-2", node, "gpu-2", "gpu-3"))
	ctx := context.Background()
	ref := gpudriver.ClaimRef{Namespace: "default", Name: "two", UID: "uid-2"}
	got, err := f.d.Prepare(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Device != "gpu-2" || got[1].Device != "gpu-3" || got[0].Pool != node {
		t.Fatalf("prepared %+v", got)
	}
	wantIDs := []string{cdi.DeviceName("2"), cdi.ClaimDeviceName("uid-2", "gpu-2")}
	if !slices.Equal(got[0].CDIDeviceIDs, wantIDs) || !slices.Equal(got[0].Requests, []string{"gpus"}) {
		t.Errorf("gpu-2: CDI %v requests %v, want %v [gpus]", got[0].CDIDeviceIDs, got[0].Requests, wantIDs)
	}
	spec, err := os.ReadFile(filepath.Join(f.cdiDir, cdi.ClaimSpecName("uid-2")))
	if err != nil {
		t.Fatalf("claim CDI spec: %v", err)
	}
	if !strings.Contains(string(spec), "DRA_CLAIM_GPU_2=default/two/"+f.devs[2].UUID) {
		t.Errorf("claim spec lacks gpu-2's env:\n%s", spec)
	}
	held := f.d.Held()
	if len(held) != 2 || held[f.devs[2].UUID] != "claim default/two" || held[f.devs[3].UUID] != "claim default/two" {
		t.Errorf("held %v", held)
	}
	again, err := f.d.Prepare(ctx, ref)
	if err != nil || len(again) != 2 || again[1].Device != "gpu-3" {
		t.Errorf("second prepare: %+v, %v", again, err)
	}
	if err := f.d.Unprepare(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if h := f.d.Held(); len(h) != 0 {
		t.Errorf("held after unprepare: %v", h)
	}
	if _, err := os.Stat(filepath.Join(f.cdiDir, cdi.ClaimSpecName("uid-2"))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("claim spec still there: %v", err)
	}
	if err := f.d.Unprepare(ctx, ref); err != nil {
		t.Errorf("unprepare of an unprepared claim: %v", err)
	}
}

func TestPrepareRefuses(t *testing.T) {
	other := claim("other", "uid-o", "n2", "gpu-0")
	nope := claim("nope", "uid-n", node, "gpu-99")
	pending := claim("pending", "uid-p", "")
	sick := claim("sick", "uid-s", node, "gpu-5")
	plugin := claim("plugin", "uid-dp", node, "gpu-6")
	f := setUp(t, other, nope, pending, sick, plugin, claim("taken", "uid-t", node, "gpu-1"), claim("wants-taken", "uid-wt", node, "gpu-1"))
	ctx := context.Background()
	if err := f.faults.InjectXid(5, 79); err != nil {
		t.Fatal(err)
	}
	f.byPlugin[f.devs[6].UUID] = "default/dp-pod"
	if _, err := f.d.Prepare(ctx, gpudriver.ClaimRef{Namespace: "default", Name: "taken", UID: "uid-t"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, claim, uid, want string
	}{
		{"another node's pool", "other", "uid-o", "is in pool n2, not this node's (n1)"},
		{"no such device", "nope", "uid-n", "no GPU gpu-99 on node n1"},
		{"not allocated", "pending", "uid-p", "is not allocated"},
		{"uid changed", "other", "uid-old", "has uid uid-o, not uid-old"},
		{"missing", "ghost", "uid-g", "get ResourceClaim default/ghost"},
		{"unhealthy", "sick", "uid-s", "is unhealthy (Xid 79: GPU has fallen off the bus)"},
		{"device plugin holds it", "plugin", "uid-dp", "is held by pod default/dp-pod through nvidia.com/gpu"},
		{"another claim holds it", "wants-taken", "uid-wt", "is held by claim default/taken"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.d.Prepare(ctx, gpudriver.ClaimRef{Namespace: "default", Name: tc.claim, UID: tc.uid})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if got := f.d.Prepared(); !slices.Equal(got, []string{"uid-t"}) {
				t.Errorf("prepared %v after a refused prepare, want [uid-t]", got)
			}
		})
	}
}

func TestCheckpointSurvivesRestart(t *testing.T) {
	f := setUp(t, claim("one", "uid-1", node, "gpu-4"))
	ctx := context.Background()
	ref := gpudriver.ClaimRef{Namespace: "default", Name: "one", UID: "uid-1"}
	if _, err := f.d.Prepare(ctx, ref); err != nil {
		t.Fatal(err)
	}
	restarted := f.newDriver(t)
	if h := restarted.Held(); h[f.devs[4].UUID] != "claim default/one" {
		t.Fatalf("after restart held %v", h)
	}
	if err := restarted.Unprepare(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if h := f.newDriver(t).Held(); len(h) != 0 {
		t.Errorf("after unprepare and restart held %v", h)
	}

	for _, tc := range []struct{ name, content string }{
		{"empty", ""},
		{"cut short", `{"version": 1, "claims": {"uid-1": {"namespace": "def`},
		{"other version", `{"version": 7, "claims": {}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(f.dir, "p", gpudriver.CheckpointName)
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := gpudriver.New(f.config())
			if !errors.Is(err, dra.ErrCheckpointDamaged) {
				t.Fatalf("error %v, want ErrCheckpointDamaged", err)
			}
			if !strings.Contains(err.Error(), "mv "+path+" "+path+".broken") {
				t.Errorf("error does not say how to recover: %v", err)
			}
		})
	}
}

func TestSliceFollowsFaultsAndDevicePlugin(t *testing.T) {
	f := setUp(t)
	ctx := context.Background()
	names := func() []string {
		t.Helper()
		if err := f.d.Publish(ctx); err != nil {
			t.Fatal(err)
		}
		o, err := f.c.Get(ctx, api.MustKindOf(&api.ResourceSlice{}), "", gpudriver.SliceName(node))
		if err != nil {
			t.Fatal(err)
		}
		s := o.(*api.ResourceSlice)
		if s.Spec.Driver != gpudriver.DriverName || s.Spec.Pool.Name != node || s.Spec.NodeName == nil || *s.Spec.NodeName != node {
			t.Fatalf("slice spec %+v", s.Spec)
		}
		var out []string
		for _, d := range s.Spec.Devices {
			out = append(out, d.Name)
		}
		return append(out, "generation "+strconv.FormatInt(s.Spec.Pool.Generation, 10))
	}
	all := []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7"}
	if got := names(); !slices.Equal(got, append(slices.Clone(all), "generation 1")) {
		t.Fatalf("first slice %v", got)
	}
	if got := names(); !slices.Equal(got, append(slices.Clone(all), "generation 1")) {
		t.Errorf("unchanged devices bumped the generation: %v", got)
	}
	if err := f.faults.InjectXid(3, 79); err != nil {
		t.Fatal(err)
	}
	if got := names(); slices.Contains(got, "gpu-3") || !slices.Contains(got, "generation 2") {
		t.Errorf("after a fault on gpu-3: %v", got)
	}
	f.byPlugin[f.devs[0].UUID] = "default/dp"
	if got := names(); slices.Contains(got, "gpu-0") || !slices.Contains(got, "generation 3") {
		t.Errorf("with gpu-0 held by the device plugin: %v", got)
	}
	delete(f.byPlugin, f.devs[0].UUID)
	if err := f.faults.Clear(3); err != nil {
		t.Fatal(err)
	}
	if got := names(); !slices.Equal(got, append(slices.Clone(all), "generation 4")) {
		t.Errorf("after repair and release: %v", got)
	}
}

// Window (b): an allocation written before an nvidia.com/gpu pod was
// bound, which the claims informer has not delivered yet, is held once
// the device manager called Refresh; the fresh list stops counting once
// the informer has caught up, so a released claim frees its GPU.
func TestRefreshSeesAllocationsTheInformerHasNot(t *testing.T) {
	f := setUp(t, claim("one", "u1", node, "gpu-0"))
	var gpu0 string
	for _, d := range f.devs {
		if d.MinorNumber == 0 {
			gpu0 = d.UUID
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The informer has not listed yet (it lags): the allocation is unseen.
	if _, ok := f.d.Held()[gpu0]; ok {
		t.Fatal("held before the informer or a refresh saw the claim")
	}
	if err := f.d.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if by := f.d.Held()[gpu0]; by != "claim default/one" {
		t.Fatalf("after Refresh gpu-0 is held by %q, want claim default/one", by)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = f.d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	if !f.d.WaitSynced(ctx) {
		t.Fatal("informer did not sync")
	}
	o, err := f.c.Get(ctx, api.MustKindOf(&api.ResourceClaim{}), "default", "one")
	if err != nil {
		t.Fatal(err)
	}
	c := o.(*api.ResourceClaim)
	c.Status.Allocation, c.Status.ReservedFor = nil, nil
	if _, err := f.c.UpdateStatus(ctx, c); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "gpu-0 free once the informer saw the claim deallocated", func() bool {
		_, ok := f.d.Held()[gpu0]
		return !ok
	})
}
