package gpuplugin_test

import (
	"context"
	"errors"
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
	if reg, _ := api.DecodeHAMiNodeDevices(gpuplugin.HAMiRegistration(devs)); len(reg) != 8 || reg[3].ID != devs[3].UUID ||
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
	p, err := gpuplugin.New(gpuplugin.Config{Source: src, Dir: dir, Devices: gpuplugin.HAMiSlots(devs), HAMi: true,
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
		alloc.Env[gpuplugin.EnvVisibleDevices] != devs[5].UUID || strings.Join(alloc.CDIDevices, ",") != "nvidia.com/gpu=5" {
		t.Fatalf("allocation %+v", alloc)
	}
	// A pod the scheduler decided nothing for fails at admission.
	other, oc := gpuPod("undecided", 1)
	if _, err := m.Allocate(context.Background(), other, oc); err == nil || !strings.Contains(err.Error(), "no decision") {
		t.Fatalf("undecided pod: %v", err)
	}
}
