package gpuplugin_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"skiff.dev/skiff/agent/devices"
	"skiff.dev/skiff/agent/devices/gpuplugin"
	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/api"
)

// HAMi's plugin through the device manager over its sockets: 80 slots,
// and a container gets the cards the scheduler decided for it (found by
// the pod and container the manager names), with HAMi-core's limits.
func TestHAMiAllocateFollowsTheDecision(t *testing.T) {
	if gpuplugin.MetadataPod != devices.MetadataPod || gpuplugin.MetadataContainer != devices.MetadataContainer {
		t.Fatal("the manager and the plugin name the pod differently")
	}
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
	devs, _ := src.Devices(context.Background())
	if reg, _ := api.DecodeHAMiNodeDevices(gpuplugin.HAMiRegistration(devs, api.HAMiDefaultNodeSettings())); len(reg) != 8 || reg[3].ID != devs[3].UUID ||
		reg[3].Count != 10 || reg[3].Devmem != 40960 || reg[3].Type != "NVIDIA-NVIDIA A100-SXM4-40GB" {
		t.Fatalf("registration %+v", reg)
	}
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
	decided := map[string][]api.HAMiContainerDevice{
		"default/gpu-sliced/cuda": {{UUID: devs[5].UUID, Type: "NVIDIA", Usedmem: 3000, Usedcores: 30}},
	}
	outcomes := make(chan string, 2)
	over := api.HAMiDefaultNodeSettings()
	over.MemoryScaling = 1.5
	p, err := gpuplugin.New(gpuplugin.Config{Source: src, Dir: dir, Devices: gpuplugin.HAMiSlots(devs, over), HAMi: true, HAMiSettings: over,
		HAMiAllocated: func(_ context.Context, pod, ctr string, err error) {
			outcomes <- fmt.Sprintf("%s/%s: %v", pod, ctr, err)
		},
		HAMiDecision: func(_ context.Context, pod, ctr string) ([]api.HAMiContainerDevice, error) {
			if d, ok := decided[pod+"/"+ctr]; ok {
				return d, nil
			}
			return nil, errors.New("no decision")
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if err := m.Wait(wctx, func(s devices.Snapshot) bool {
		rs := s[gpuplugin.ResourceName]
		return rs.Registered && len(rs.Devices) == 80 && rs.Devices[gpu.ReplicaID(devs[0].UUID, 9)] == pluginapi.Healthy
	}); err != nil {
		t.Fatalf("80 slots: %v", err)
	}

	pod, c := gpuPod("sliced", 1)
	alloc, err := m.Allocate(context.Background(), pod, c)
	if err != nil {
		t.Fatal(err)
	}
	if alloc.Env["CUDA_DEVICE_MEMORY_LIMIT_0"] != "3000m" || alloc.Env["CUDA_DEVICE_SM_LIMIT"] != "30" ||
		alloc.Env[gpuplugin.EnvVisibleDevices] != devs[5].UUID || strings.Join(alloc.CDIDevices, ",") != "nvidia.com/gpu=5" ||
		alloc.Env[api.HAMiEnvOversubscribe] != "true" {
		t.Fatalf("allocation %+v", alloc)
	}
	if o := <-outcomes; o != "default/gpu-sliced/cuda: <nil>" {
		t.Fatalf("outcome %q", o)
	}
	// A pod the scheduler decided nothing for fails at admission, and is
	// told so (its bind phase goes to failed).
	other, oc := gpuPod("undecided", 1)
	if _, err := m.Allocate(context.Background(), other, oc); err == nil || !strings.Contains(err.Error(), "no decision") {
		t.Fatalf("undecided pod: %v", err)
	}
	if o := <-outcomes; !strings.HasPrefix(o, "default/gpu-undecided/cuda: ") || !strings.Contains(o, "no decision") {
		t.Fatalf("outcome %q", o)
	}
}

// HAMi's device config on the node: deviceSplitCount slots per GPU,
// deviceMemoryScaling and deviceCoreScaling in the registration, filtered
// GPUs neither advertised nor registered.
func TestHAMiNodeSettings(t *testing.T) {
	src, _, err := gpu.Open("sim:dgxa100", gpu.Options{NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	devs, _ := src.Devices(context.Background())
	s := api.HAMiNodeSettings{SplitCount: 4, MemoryScaling: 1.5, CoreScaling: 2, FilterIndexes: "7", FilterUUIDs: devs[0].UUID}
	slots := gpuplugin.HAMiSlots(devs, s)
	if len(slots) != 6*4 || slots[0].ParentIndex != 1 || slots[len(slots)-1].ID != gpu.ReplicaID(devs[6].UUID, 3) {
		t.Fatalf("%d slots, first of GPU %d, last %s", len(slots), slots[0].ParentIndex, slots[len(slots)-1].ID)
	}
	layout, err := gpuplugin.Layout(gpuplugin.HAMiConfig(s), devs, nil)
	if err != nil || len(layout) != len(slots) {
		t.Fatalf("layout %d: %v", len(layout), err)
	}
	reg, err := api.DecodeHAMiNodeDevices(gpuplugin.HAMiRegistration(devs, s))
	if err != nil || len(reg) != 6 || reg[0].ID != devs[1].UUID || reg[0].Count != 4 || reg[0].Devmem != 61440 || reg[0].Devcore != 200 {
		t.Fatalf("registration %+v: %v", reg, err)
	}
}
