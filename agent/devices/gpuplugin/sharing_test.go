package gpuplugin_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"skiff.dev/skiff/agent/devices"
	"skiff.dev/skiff/agent/devices/gpuplugin"
	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/agent/podworker"
	"skiff.dev/skiff/api"
)

// timeSlicing4 is the GPU operator docs' time-slicing config (the value of
// key "any" of ConfigMap time-slicing-config-all).
const timeSlicing4 = `version: v1
flags:
  migStrategy: none
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 4
`

func TestParseConfigUpstreamWords(t *testing.T) {
	pc, err := gpuplugin.ParseConfig([]byte(timeSlicing4))
	if err != nil {
		t.Fatal(err)
	}
	if pc.Sharing() != gpu.SharingTimeSlicing || pc.TimeSlicing.FailRequestsGreaterThanOne {
		t.Errorf("time-slicing: %+v", pc)
	}
	if n, name := pc.ReplicasOf("nvidia.com/gpu"); n != 4 || name != "nvidia.com/gpu" {
		t.Errorf("replicas of nvidia.com/gpu: %d %s", n, name)
	}
	mps, err := gpuplugin.ParseConfig([]byte("version: v1\nsharing:\n  mps:\n    renameByDefault: true\n    resources:\n    - name: gpu\n      replicas: 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if n, name := mps.ReplicasOf("nvidia.com/gpu"); n != 2 || name != "nvidia.com/gpu.shared" || !mps.MPS.FailRequestsGreaterThanOne {
		t.Errorf("mps: %d %s %+v", n, name, mps.MPS)
	}
	for _, tt := range []struct{ name, config, want string }{
		{"one replica", strings.Replace(timeSlicing4, "replicas: 4", "replicas: 1", 1),
			"sharing.timeSlicing.resources[0].replicas: number of replicas must be >= 2"},
		{"both strategies", timeSlicing4 + "  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n",
			"Time-slicing and MPS are mutually exclusive"},
		{"no resources", "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n", "sharing.timeSlicing: no resources specified"},
		{"no replicas", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n", "no replicas specified"},
		{"bad version", "version: v2\n", "unknown version: v2"},
		{"bad mig strategy", "version: v1\nflags:\n  migStrategy: some\n", "unknown MIG strategy: some"},
		{"mixed with mps", "version: v1\nflags:\n  migStrategy: mixed\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n",
			"using --mig-strategy=mixed is not supported with MPS"},
		{"devices", strings.Replace(timeSlicing4, "replicas: 4", "replicas: 4\n      devices: [0, 1]", 1),
			"Customizing the 'devices' field in sharing.timeSlicing.resources is not yet supported in the config"},
		{"rename", strings.Replace(timeSlicing4, "replicas: 4", "replicas: 4\n      rename: nvidia.com/mine", 1),
			"Setting the 'rename' field in sharing.timeSlicing.resources is not yet supported in the config"},
		{"unknown field", strings.Replace(timeSlicing4, "migStrategy: none", "migStrategy: none\n  gdsEnabled: true", 1),
			"flags.gdsEnabled: field not supported by skiff's built-in device plugin"},
		{"duplicate key", "version: v1\nversion: v1\n", "unmarshal error"},
		{"policy", "version: v1\nflags:\n  plugin:\n    sharedDevicesAllocationPolicy: random\n", "invalid --shared-devices-allocation-policy option: random"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := gpuplugin.ParseConfig([]byte(tt.config))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}

func dgxDevices(t *testing.T) (gpu.Source, []gpu.Device) {
	t.Helper()
	src, _, err := gpu.Open("sim:dgxa100", gpu.Options{NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	devs, _ := src.Devices(t.Context())
	return src, devs
}

func TestLayoutAndLabels(t *testing.T) {
	_, devs := dgxDevices(t)
	pc, _ := gpuplugin.ParseConfig([]byte(timeSlicing4))
	layout, err := gpuplugin.Layout(pc, devs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(layout) != 32 || layout[5].ID != devs[1].UUID+"::1" || layout[5].Resource != "nvidia.com/gpu" || layout[5].MemoryMiB != 40960 {
		t.Errorf("layout: %d devices, [5] %+v", len(layout), layout[5])
	}
	l := gpuplugin.Labels(pc, devs, layout, true)
	for k, want := range map[string]string{
		"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-SHARED", "nvidia.com/gpu.replicas": "4",
		"nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.count": "8",
		"nvidia.com/mps.capable": "false", "nvidia.com/mig.capable": "true",
	} {
		if l[k] != want {
			t.Errorf("label %s = %q, want %q", k, l[k], want)
		}
	}
	mps, _ := gpuplugin.ParseConfig([]byte("version: v1\nsharing:\n  mps:\n    renameByDefault: true\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"))
	layout, _ = gpuplugin.Layout(mps, devs, nil)
	if sd := layout[0]; sd.Resource != "nvidia.com/gpu.shared" || sd.MemoryMiB != 10240 || sd.SMPercent != 25 || sd.Sharing != gpu.SharingMPS {
		t.Errorf("MPS share: %+v", sd)
	}
	l = gpuplugin.Labels(mps, devs, layout, true)
	if l["nvidia.com/gpu.product"] != "NVIDIA-A100-SXM4-40GB" || l["nvidia.com/mps.capable"] != "true" || l["nvidia.com/gpu.sharing-strategy"] != "mps" {
		t.Errorf("renamed MPS labels: %v", l)
	}
	l = gpuplugin.Labels(nil, devs, nil, true)
	if l["nvidia.com/gpu.replicas"] != "1" || l["nvidia.com/gpu.sharing-strategy"] != "none" || l["nvidia.com/gpu.product"] != "NVIDIA-A100-SXM4-40GB" {
		t.Errorf("no config: %v", l)
	}
}

// setUpSet runs a device manager and a plugin Set over a simulated DGX A100.
func setUpSet(t *testing.T) (*devices.Manager, *gpuplugin.Set, []gpu.Device) {
	t.Helper()
	dir, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	src, devs := dgxDevices(t)
	cfg := devices.DefaultConfig()
	cfg.Dir = dir
	m, err := devices.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	s, err := gpuplugin.NewSet(gpuplugin.SetConfig{Source: src, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return m, s, devs
}

func waitCapacity(t *testing.T, m *devices.Manager, res string, n int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := m.Wait(ctx, func(devices.Snapshot) bool {
		c, a := m.Resources()
		cq, aq := c[res], a[res]
		return cq.Value() == n && aq.Value() == n
	})
	if err != nil {
		c, _ := m.Resources()
		t.Fatalf("%s capacity %v, want %d: %v", res, c, n, err)
	}
}

// TestSetReconfiguresAndSpreads: the Set applies time-slicing without a
// restart (32 replicas registered in place of 8 GPUs), hands replicas out
// over the least-used GPUs first, refuses two replicas to one container
// when failRequestsGreaterThanOne is set (the kubelet's admission words),
// and goes back to whole GPUs under renameByDefault's resource name.
func TestSetReconfiguresAndSpreads(t *testing.T) {
	m, s, devs := setUpSet(t)
	if err := s.Apply(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	waitCapacity(t, m, "nvidia.com/gpu", 8)
	pc, _ := gpuplugin.ParseConfig([]byte(timeSlicing4))
	if err := s.Apply(t.Context(), pc); err != nil {
		t.Fatal(err)
	}
	waitCapacity(t, m, "nvidia.com/gpu", 32)
	var parents []string
	for i := range 8 {
		p, c := gpuPod(string(rune('a'+i)), 1)
		a, err := m.Allocate(t.Context(), p, c)
		if err != nil {
			t.Fatal(err)
		}
		id := a.Devices["nvidia.com/gpu"][0]
		uuid, _, ok := gpu.ParseReplicaID(id)
		if !ok {
			t.Fatalf("allocated %s, not a replica", id)
		}
		parents = append(parents, uuid)
		if a.CDIDevices[0] != "nvidia.com/gpu="+id || a.Env["NVIDIA_VISIBLE_DEVICES"] != uuid {
			t.Errorf("allocation of %s: %v %v", id, a.CDIDevices, a.Env)
		}
	}
	slices.Sort(parents)
	if distinct := slices.Compact(slices.Clone(parents)); len(distinct) != 8 {
		t.Errorf("8 one-replica pods went to %d GPUs, want all 8 (least-used first): %v", len(distinct), parents)
	}
	p, c := gpuPod("two", 2)
	if _, err := m.Allocate(t.Context(), p, c); err != nil {
		t.Errorf("two replicas without failRequestsGreaterThanOne: %v", err)
	}

	strict, _ := gpuplugin.ParseConfig([]byte(strings.Replace(timeSlicing4, "timeSlicing:", "timeSlicing:\n    failRequestsGreaterThanOne: true\n    renameByDefault: true", 1)))
	if err := s.Apply(t.Context(), strict); err != nil {
		t.Fatal(err)
	}
	waitCapacity(t, m, "nvidia.com/gpu.shared", 32)
	p, c = gpuPod("three", 2)
	c.Resources.Limits = api.ResourceList{"nvidia.com/gpu.shared": c.Resources.Limits["nvidia.com/gpu"]}
	err := m.Admit(t.Context(), p)
	var ae *podworker.AdmissionError
	want := `Allocate failed due to rpc error: code = Unknown desc = invalid allocation request for "nvidia.com/gpu.shared": invalid request: maximum request size for shared resources is 1; found 2, which is unexpected`
	if !errors.As(err, &ae) || ae.Message != want {
		t.Errorf("two shared replicas: %v\nwant %s", err, want)
	}
	_, a := m.Resources()
	if q := a["nvidia.com/gpu"]; q.Value() != 0 {
		t.Errorf("nvidia.com/gpu still allocatable after the rename: %v", a)
	}
	_ = devs
}
