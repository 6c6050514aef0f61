package gpuplugin_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"skiff.dev/skiff/agent/devices"
	"skiff.dev/skiff/agent/devices/gpuplugin"
	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/gputopology"
)

type fixture struct {
	src    gpu.Source
	faults gpu.FaultInjector
	m      *devices.Manager
	p      *gpuplugin.Plugin
}

// setUp runs a manager and the GPU plugin over a simulated DGX A100, over
// real unix sockets, and waits for the plugin's first device list.
func setUp(t testing.TB) *fixture {
	t.Helper()
	dir, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	src, _, err := gpu.Open("sim:dgxa100", gpu.Options{NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	cfg := devices.DefaultConfig()
	cfg.Dir = dir
	m, err := devices.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	p, err := gpuplugin.New(gpuplugin.Config{Source: src, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("plugin Run: %v", err)
		}
	})
	f := &fixture{src: src, faults: src.(gpu.FaultInjector), m: m, p: p}
	f.waitAllocatable(t, 8)
	return f
}

func (f *fixture) waitAllocatable(t testing.TB, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := f.m.Wait(ctx, func(s devices.Snapshot) bool {
		rs := s[gpuplugin.ResourceName]
		h := 0
		for _, v := range rs.Devices {
			if v == pluginapi.Healthy {
				h++
			}
		}
		return rs.Registered && len(rs.Devices) == 8 && h == n
	})
	if err != nil {
		t.Fatalf("waiting for %d allocatable GPUs: %v (%+v)", n, err, f.m.Snapshot())
	}
	c, a := f.m.Resources()
	cq, aq := c[gpuplugin.ResourceName], a[gpuplugin.ResourceName]
	if cq.Value() != 8 || aq.Value() != int64(n) {
		t.Fatalf("capacity/allocatable = %d/%d, want 8/%d", cq.Value(), aq.Value(), n)
	}
}

func gpuPod(uid string, n int64) (*api.Pod, *api.Container) {
	p := &api.Pod{}
	p.Name, p.Namespace, p.UID = "gpu-"+uid, "default", uid
	p.Spec.Containers = []api.Container{{Name: "cuda"}}
	c := &p.Spec.Containers[0]
	c.Resources.Limits = api.ResourceList{gpuplugin.ResourceName: *resource.NewQuantity(n, resource.DecimalSI)}
	return p, c
}

func TestHealthFaultAndRecovery(t *testing.T) {
	f := setUp(t)
	if err := f.faults.InjectXid(3, 79); err != nil {
		t.Fatal(err)
	}
	f.waitAllocatable(t, 7)
	// The faulty GPU is never handed out.
	devs, _ := f.src.Devices(context.Background())
	bad := devs[3].UUID
	for i := range 7 {
		p, c := gpuPod(fmt.Sprint("u", i), 1)
		alloc, err := f.m.Allocate(context.Background(), p, c)
		if err != nil {
			t.Fatal(err)
		}
		if alloc.Devices[gpuplugin.ResourceName][0] == bad {
			t.Fatalf("pod %d got the faulty GPU %s", i, bad)
		}
	}
	if err := f.faults.Clear(3); err != nil {
		t.Fatal(err)
	}
	f.waitAllocatable(t, 8)
	p, c := gpuPod("last", 1)
	alloc, err := f.m.Allocate(context.Background(), p, c)
	if err != nil || alloc.Devices[gpuplugin.ResourceName][0] != bad {
		t.Fatalf("after recovery = %v, %v; want the recovered GPU %s", alloc.Devices, err, bad)
	}
}

func TestAllocateTwoGPUsIsNVLinkPairWithCDI(t *testing.T) {
	f := setUp(t)
	ctx := context.Background()
	devs, _ := f.src.Devices(ctx)
	topo, _ := f.src.Topology(ctx)
	index := map[string]gpu.Device{}
	for _, d := range devs {
		index[d.UUID] = d
	}
	p, c := gpuPod("two", 2)
	alloc, err := f.m.Allocate(ctx, p, c)
	if err != nil {
		t.Fatal(err)
	}
	ids := alloc.Devices[gpuplugin.ResourceName]
	if len(ids) != 2 {
		t.Fatalf("devices = %v", ids)
	}
	a, b := index[ids[0]], index[ids[1]]
	if topo.Link(a.Index, b.Index).NVLinks == 0 {
		t.Fatalf("GPUs %d and %d are not NVLink-connected: %v", a.Index, b.Index, topo.Link(a.Index, b.Index))
	}
	// The best pair also shares a PCIe switch (tie-break over equal NVLink).
	best := gputopology.PreferredSet(topo, []int{0, 1, 2, 3, 4, 5, 6, 7}, nil, 2)
	if gputopology.SetScore(topo, []int{a.Index, b.Index}) != gputopology.SetScore(topo, best) {
		t.Fatalf("pair %d,%d scores less than the best %v", a.Index, b.Index, best)
	}
	wantCDI := []string{fmt.Sprintf("nvidia.com/gpu=%d", a.Index), fmt.Sprintf("nvidia.com/gpu=%d", b.Index)}
	if strings.Join(alloc.CDIDevices, " ") != strings.Join(wantCDI, " ") {
		t.Fatalf("CDI devices = %v, want %v", alloc.CDIDevices, wantCDI)
	}
	if got := alloc.Env[gpuplugin.EnvVisibleDevices]; got != ids[0]+","+ids[1] {
		t.Fatalf("NVIDIA_VISIBLE_DEVICES = %q, want %q", got, ids[0]+","+ids[1])
	}
}

// TestChurnNeverSharesAGPU: many goroutines start and end 1-GPU pods on an
// 8-GPU node; no GPU is ever held by two live pods, and a full node says
// insufficient rather than double-booking.
func TestChurnNeverSharesAGPU(t *testing.T) {
	f := setUp(t)
	ctx := context.Background()
	var (
		mu      sync.Mutex
		holder  = map[string]string{} // GPU UUID -> live pod uid
		granted int
	)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				uid := fmt.Sprintf("g%d-%d", g, i)
				p, c := gpuPod(uid, 1)
				alloc, err := f.m.Allocate(ctx, p, c)
				if err != nil {
					if !errors.Is(err, devices.ErrInsufficient) {
						errs <- err
						return
					}
					continue
				}
				id := alloc.Devices[gpuplugin.ResourceName][0]
				mu.Lock()
				if other, ok := holder[id]; ok {
					mu.Unlock()
					errs <- fmt.Errorf("GPU %s given to %s while %s holds it", id, uid, other)
					return
				}
				holder[id] = uid
				granted++
				mu.Unlock()
				// Idempotent while live.
				again, err := f.m.Allocate(ctx, p, c)
				if err != nil || again.Devices[gpuplugin.ResourceName][0] != id {
					errs <- fmt.Errorf("second Allocate of %s = %v, %v; want %s", uid, again.Devices, err, id)
					return
				}
				mu.Lock()
				delete(holder, id)
				mu.Unlock()
				if err := f.m.Release(ctx, uid); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if granted == 0 {
		t.Fatal("no allocation succeeded")
	}
	if held := f.m.Snapshot()[gpuplugin.ResourceName].Allocated; len(held) != 0 {
		t.Fatalf("after churn, still allocated: %v", held)
	}
}
