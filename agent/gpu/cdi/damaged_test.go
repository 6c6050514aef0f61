package cdi

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/agent/gpu/nvidiasmi"
	"skiff.dev/skiff/api/gputopology"
)

// TestSimSpecRegenerated: skiff owns the simulated GPUs' spec and the
// files it mounts; whatever happened to them (cut short, emptied,
// overwritten, deleted), writing the spec again at start makes them whole.
func TestSimSpecRegenerated(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, cfg Config)
	}{
		{"spec emptied", func(t *testing.T, cfg Config) { cut(t, specPath(cfg), 0) }},
		{"spec cut short", func(t *testing.T, cfg Config) { cut(t, specPath(cfg), size(t, specPath(cfg))/2) }},
		{"spec overwritten", func(t *testing.T, cfg Config) { write(t, specPath(cfg), "\x00\xff not yaml: [") }},
		{"spec of another kind", func(t *testing.T, cfg Config) {
			write(t, specPath(cfg), "cdiVersion: \"0.5.0\"\nkind: example.com/other\ndevices: []\n")
		}},
		{"spec removed", func(t *testing.T, cfg Config) {
			if err := os.Remove(specPath(cfg)); err != nil {
				t.Fatal(err)
			}
		}},
		{"record cut short", func(t *testing.T, cfg Config) { cut(t, recordPath(cfg, 0), 3) }},
		{"script emptied", func(t *testing.T, cfg Config) { cut(t, filepath.Join(cfg.nodeDir(), "nvidia-smi"), 0) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, devs, topo := simGPUs(t)
			if _, err := WriteSimSpec(cfg, devs, nil, topo); err != nil {
				t.Fatal(err)
			}
			want := snapshotFiles(t, cfg)
			tt.damage(t, cfg)
			if _, err := WriteSimSpec(cfg, devs, nil, topo); err != nil {
				t.Fatalf("write the spec over a damaged one: %v", err)
			}
			got := snapshotFiles(t, cfg)
			for path, b := range want {
				if got[path] != b {
					t.Errorf("%s differs after the rewrite", path)
				}
			}
			cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(cfg.SpecDir), cdiapi.WithAutoRefresh(false))
			if err != nil {
				t.Fatal(err)
			}
			if errs := cache.GetErrors(); len(errs) > 0 {
				t.Fatalf("the spec directory still has errors: %v", errs)
			}
			if n := len(cache.ListDevices()); n != 2*len(devs) {
				t.Fatalf("%d devices, want %d", n, 2*len(devs))
			}
		})
	}
}

// TestDamagedRealSpec: a spec skiff does not own (nvidia-ctk's) that does
// not read is reported by name, with the command that regenerates it; a
// good spec beside it is enough for GPUs to work.
func TestDamagedRealSpec(t *testing.T) {
	good := "cdiVersion: \"0.5.0\"\nkind: nvidia.com/gpu\ndevices:\n- name: \"0\"\n  containerEdits:\n    deviceNodes: [{path: /dev/nvidia0, hostPath: /dev/null}]\n"
	tests := []struct {
		name    string
		files   map[string]string
		damaged string // the file the error names; "" for no error
	}{
		{"cut short", map[string]string{"nvidia.yaml": good[:len(good)-30]}, "nvidia.yaml"},
		{"emptied", map[string]string{"nvidia.yaml": ""}, "nvidia.yaml"},
		{"garbage", map[string]string{"nvidia.json": "{\x00"}, "nvidia.json"},
		{"a good one beside it", map[string]string{"nvidia.yaml": good, "old.yaml": "{"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, data := range tt.files {
				write(t, filepath.Join(dir, name), data)
			}
			err := RealCDIAvailable(dir)
			if tt.damaged == "" {
				if err != nil {
					t.Fatalf("RealCDIAvailable: %v", err)
				}
				return
			}
			t.Logf("the error: %v", err)
			if !errors.Is(err, ErrSpecDamaged) {
				t.Fatalf("RealCDIAvailable: %v, want ErrSpecDamaged", err)
			}
			for _, want := range []string{filepath.Join(dir, tt.damaged), "nvidia-ctk cdi generate"} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q: %v", want, err)
				}
			}
		})
	}
}

func simGPUs(t *testing.T) (Config, []gpu.Device, *gputopology.Topology) {
	t.Helper()
	p, _ := gpu.BuiltinProfile("dgxa100")
	s, err := gpu.NewSim(p, "node-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	devs, err := s.Devices(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	topo, err := s.Topology(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return Config{NodeName: "node-1", SpecDir: t.TempDir(), DataDir: t.TempDir()}, devs, topo
}

func specPath(cfg Config) string { return filepath.Join(cfg.SpecDir, cfg.SpecName()) }

func recordPath(cfg Config, index int) string {
	return filepath.Join(cfg.nodeDir(), "devices", nvidiasmi.RecordName(index))
}

// snapshotFiles reads the spec and every file it mounts.
func snapshotFiles(t *testing.T, cfg Config) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, dir := range []string{cfg.SpecDir, cfg.nodeDir(), filepath.Join(cfg.nodeDir(), "devices")} {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.IsDir() {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			out[filepath.Join(dir, e.Name())] = string(b)
		}
	}
	return out
}

func size(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func cut(t *testing.T, path string, n int64) {
	t.Helper()
	if err := os.Truncate(path, n); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
