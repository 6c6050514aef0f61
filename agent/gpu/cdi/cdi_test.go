package cdi

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/agent/gpu/nvidiasmi"
)

func simSpec(t *testing.T) (Config, []gpu.Device) {
	t.Helper()
	p, _ := gpu.BuiltinProfile("dgxa100")
	s, err := gpu.NewSim(p, "node-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	devs, _ := s.Devices(t.Context())
	topo, _ := s.Topology(t.Context())
	cfg := Config{NodeName: "node-1", SpecDir: t.TempDir(), DataDir: t.TempDir()}
	path, err := WriteSimSpec(cfg, devs, nil, topo)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cdiapi.ReadSpec(path, 0); err != nil {
		t.Fatalf("spec does not validate: %v", err)
	}
	return cfg, devs
}

// TestReplicaDevices: with a time-slicing layout every replica is a CDI
// device of its own, with its own record (SUB_ID, the limits) and its
// GPU's load directory, read-write.
func TestReplicaDevices(t *testing.T) {
	p, _ := gpu.BuiltinProfile("dgxa100")
	s, err := gpu.NewSim(p, "node-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	devs, _ := s.Devices(t.Context())
	topo, _ := s.Topology(t.Context())
	layout, err := gpu.Replicas(devs, gpu.SharingMPS, 4, "nvidia.com/gpu")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{NodeName: "node-1", SpecDir: t.TempDir(), DataDir: t.TempDir()}
	if _, err := WriteSimSpec(cfg, devs, layout, topo); err != nil {
		t.Fatal(err)
	}
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(cfg.SpecDir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(cache.ListDevices()); n != 16+32 {
		t.Errorf("%d devices, want 16 GPUs and 32 replicas", n)
	}
	id := gpu.ReplicaID(devs[3].UUID, 2)
	spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	if _, err := cache.InjectDevices(spec, DeviceName(id)); err != nil {
		t.Fatal(err)
	}
	var rec, load string
	for _, m := range spec.Mounts {
		switch m.Destination {
		case filepath.Join(RecordDir, "gpu-03-r002.env"):
			rec = m.Source
		case filepath.Join(LoadDir, devs[3].UUID):
			load = m.Source
			if !slices.Contains(m.Options, "rw") {
				t.Errorf("load directory mounted %v, want rw", m.Options)
			}
		}
	}
	data, err := os.ReadFile(rec)
	if err != nil {
		t.Fatalf("replica record: %v (mounts %v)", err, spec.Mounts)
	}
	for _, want := range []string{"SUB_ID='" + id + "'", "SUB_KIND='mps'", "SUB_MEM='10240'", "SUB_SM='25'", "SUB_DOMAIN_MEM='40960'"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("record lacks %s:\n%s", want, data)
		}
	}
	if st, err := os.Stat(load); err != nil || !st.IsDir() || st.Mode().Perm() != 0o777 || st.Mode()&os.ModeSticky == 0 {
		t.Errorf("load directory %s: %v %v", load, st.Mode(), err)
	}
}

func TestSimSpecResolves(t *testing.T) {
	cfg, devs := simSpec(t)
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(cfg.SpecDir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	if errs := cache.GetErrors(); len(errs) > 0 {
		t.Fatalf("cache errors: %v", errs)
	}
	if n := len(cache.ListDevices()); n != 16 {
		t.Errorf("%d devices, want 8 by index and 8 by UUID", n)
	}
	tests := []struct {
		name    string
		devices []string
		nodes   []string
		records []string
	}{
		{"by index", []string{DeviceName("0")}, []string{"/dev/nvidia0"}, []string{nvidiasmi.RecordName(0)}},
		{"by UUID", []string{DeviceName(devs[3].UUID)}, []string{"/dev/nvidia3"}, []string{nvidiasmi.RecordName(3)}},
		{"two GPUs", []string{DeviceName("4"), DeviceName("5")}, []string{"/dev/nvidia4", "/dev/nvidia5"},
			[]string{nvidiasmi.RecordName(4), nvidiasmi.RecordName(5)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
			if _, err := cache.InjectDevices(spec, tt.devices...); err != nil {
				t.Fatal(err)
			}
			var nodes []string
			for _, d := range spec.Linux.Devices {
				nodes = append(nodes, d.Path)
			}
			for _, want := range append(tt.nodes, "/dev/nvidiactl", "/dev/nvidia-uvm") {
				if !slices.Contains(nodes, want) {
					t.Errorf("device nodes %v lack %s", nodes, want)
				}
			}
			if len(nodes) != len(tt.nodes)+2 {
				t.Errorf("device nodes %v: more than asked for", nodes)
			}
			mounts := map[string]string{}
			for _, m := range spec.Mounts {
				mounts[m.Destination] = m.Source
			}
			if src := mounts[ScriptPath]; src == "" {
				t.Errorf("no nvidia-smi mount: %v", mounts)
			}
			for _, r := range tt.records {
				src := mounts[filepath.Join(RecordDir, r)]
				if _, err := os.Stat(src); err != nil {
					t.Errorf("record %s: %v (mounts %v)", r, err, mounts)
				}
			}
			if src := mounts[GPULoadPath]; src == "" {
				t.Errorf("no gpu-load mount: %v", mounts)
			}
			if len(mounts) != 2*len(tt.records)+2 { // a record and a load directory each
				t.Errorf("mounts %v", mounts)
			}
			if !slices.Contains(spec.Process.Env, EnvSimulated+"=1") {
				t.Errorf("env %v", spec.Process.Env)
			}
		})
	}
}

func TestRemoveSimSpec(t *testing.T) {
	cfg, _ := simSpec(t)
	if err := RemoveSimSpec(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cfg.SpecDir, cfg.SpecName())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("spec still there: %v", err)
	}
	if err := RemoveSimSpec(cfg); err != nil {
		t.Errorf("second remove: %v", err)
	}
}

func TestRealCDIAvailable(t *testing.T) {
	cfg, _ := simSpec(t)
	if err := RealCDIAvailable(cfg.SpecDir); !errors.Is(err, ErrNoRealSpec) {
		t.Errorf("a simulated spec counted as real: %v", err)
	}
	real := t.TempDir()
	spec := `cdiVersion: "0.5.0"
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes: [{path: /dev/nvidia0, hostPath: /dev/null}]
`
	if err := os.WriteFile(filepath.Join(real, "nvidia.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := RealCDIAvailable(real); err != nil {
		t.Errorf("real spec not found: %v", err)
	}
	if err := RealCDIAvailable(t.TempDir()); err == nil || !errors.Is(err, ErrNoRealSpec) {
		t.Errorf("empty dir: %v", err)
	}
}
