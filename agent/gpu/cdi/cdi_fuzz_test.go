package cdi

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"sigs.k8s.io/yaml"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"skiff.dev/skiff/agent/gpu"
)

// nvidiaCTKSpec has the shape of what `nvidia-ctk cdi generate` writes.
const nvidiaCTKSpec = `---
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
- name: GPU-4404041a-04cf-1ccf-9e70-f139a9b1e23c
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
- name: all
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
containerEdits:
  env:
  - NVIDIA_VISIBLE_DEVICES=void
  deviceNodes:
  - path: /dev/nvidiactl
  - path: /dev/nvidia-uvm
  hooks:
  - hookName: createContainer
    path: /usr/bin/nvidia-ctk
    args: [nvidia-ctk, hook, update-ldcache, --folder, /usr/lib/x86_64-linux-gnu]
  mounts:
  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15
    containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15
    options: [ro, nosuid, nodev, bind]
`

// FuzzCDISpec loads any spec file as the runtime and RealCDIAvailable do.
// RealCDIAvailable accepts exactly a spec that loads, of kind
// nvidia.com/gpu, with devices; every device of a loaded spec injects
// into a container's OCI spec (or fails with an error); and a loaded spec
// written back as YAML loads again with the same devices.
func FuzzCDISpec(f *testing.F) {
	f.Add([]byte(nvidiaCTKSpec), false)
	f.Add([]byte(`{"cdiVersion":"0.6.0","kind":"nvidia.com/gpu","devices":[{"name":"0","containerEdits":{"env":["A=1"]}}]}`), true)
	f.Add([]byte("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: []\n"), false)
	f.Add([]byte("cdiVersion: 0.5.0\nkind: example.com/widget\ndevices:\n- name: w0\n  containerEdits: {env: [W=0]}\n"), false)
	f.Add([]byte("cdiVersion: 9.9.9\nkind: nvidia.com/gpu\n"), false)
	f.Add([]byte("kind: nvidia.com/gpu\ndevices:\n- name: \"0\"\n- name: \"0\"\n"), false)
	f.Add([]byte("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: \"0\"\n  containerEdits:\n    mounts: [{hostPath: \"\", containerPath: \"\"}]\n"), false)
	f.Add([]byte("{"), false)
	f.Add([]byte(""), false)
	p, err := gpu.BuiltinProfile("dgxh100")
	if err != nil {
		f.Fatal(err)
	}
	sim, err := gpu.NewSim(p, "fuzz", nil)
	if err != nil {
		f.Fatal(err)
	}
	devs, _ := sim.Devices(f.Context())
	topo, _ := sim.Topology(f.Context())
	sim.Close()
	simPath, err := WriteSimSpec(Config{NodeName: "fuzz", SpecDir: f.TempDir(), DataDir: f.TempDir()}, devs, nil, topo)
	if err != nil {
		f.Fatal(err)
	}
	if data, err := os.ReadFile(simPath); err == nil {
		f.Add(data, false)
	}
	f.Fuzz(func(t *testing.T, data []byte, asJSON bool) {
		if len(data) > 64<<10 {
			t.Skip("input too large")
		}
		dir := t.TempDir()
		name := "nvidia.yaml"
		if asJSON {
			name = "nvidia.json"
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		spec, loadErr := cdiapi.ReadSpec(path, 0)
		realErr := RealCDIAvailable(dir)
		loaded := loadErr == nil && spec.GetVendor()+"/"+spec.GetClass() == Kind && len(spec.Devices) > 0
		if loaded != (realErr == nil) {
			t.Fatalf("spec loads as %s with %d devices (%v), but RealCDIAvailable: %v", spec.GetVendor()+"/"+spec.GetClass(), len(spec.Devices), loadErr, realErr)
		}
		if loadErr != nil {
			return
		}
		cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(dir), cdiapi.WithAutoRefresh(false))
		if err != nil {
			t.Fatalf("spec reads, the cache does not: %v", err)
		}
		names := cache.ListDevices()
		for _, dev := range names {
			ociSpec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
			if _, err := cache.InjectDevices(ociSpec, dev); err != nil {
				_ = err.Error()
			}
		}
		out, err := yaml.Marshal(spec.Spec)
		if err != nil {
			t.Fatalf("encode a loaded spec: %v", err)
		}
		path2 := filepath.Join(dir, "again.yaml")
		if err := os.WriteFile(path2, out, 0o600); err != nil {
			t.Fatal(err)
		}
		spec2, err := cdiapi.ReadSpec(path2, 0)
		if err != nil {
			t.Fatalf("a loaded spec written back does not load: %v\n%s", err, out)
		}
		var d1, d2 []string
		for _, d := range spec.Devices {
			d1 = append(d1, d.Name)
		}
		for _, d := range spec2.Devices {
			d2 = append(d2, d.Name)
		}
		if !slices.Equal(d1, d2) {
			t.Fatalf("devices %q became %q when written back", d1, d2)
		}
	})
}
