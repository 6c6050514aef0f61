package migparted_test

import (
	"maps"
	"strings"
	"testing"

	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/agent/gpu/migparted"
)

// Every default geometry meant for a simulated server fits its GPUs, with
// the real profile names and counts (A100-40GB: 1g.5gb×7, 2g.10gb×3,
// 3g.20gb×2, 4g.20gb×1, 7g.40gb×1; and the others').
func TestDefaultGeometriesFitTheSimulatedServers(t *testing.T) {
	cfg := migparted.Default()
	for _, tt := range []struct {
		profile string
		configs map[string]map[string]int // config → profile → count on every GPU
	}{
		{"dgxa100", map[string]map[string]int{
			"all-1g.5gb": {"1g.5gb": 7}, "all-2g.10gb": {"2g.10gb": 3}, "all-3g.20gb": {"3g.20gb": 2},
			"all-4g.20gb": {"4g.20gb": 1}, "all-7g.40gb": {"7g.40gb": 1}, "all-1g.10gb": {"1g.10gb": 4},
			"all-1g.5gb.me": {"1g.5gb+me": 1},
			"all-balanced":  {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}}},
		{"dgxa100-80gb", map[string]map[string]int{"all-1g.10gb": {"1g.10gb": 7}, "all-7g.80gb": {"7g.80gb": 1},
			"all-balanced": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}},
		{"dgxh100", map[string]map[string]int{"all-1g.10gb": {"1g.10gb": 7}, "all-1g.20gb": {"1g.20gb": 4},
			"all-3g.40gb": {"3g.40gb": 2}, "all-balanced": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}},
		{"dgxh200", map[string]map[string]int{"all-1g.18gb": {"1g.18gb": 7}, "all-7g.141gb": {"7g.141gb": 1},
			"all-balanced": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}}},
		{"dgxb200", map[string]map[string]int{"all-1g.23gb": {"1g.23gb": 7}, "all-7g.180gb": {"7g.180gb": 1},
			"all-balanced": {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1}}},
	} {
		t.Run(tt.profile, func(t *testing.T) {
			p, err := gpu.BuiltinProfile(tt.profile)
			if err != nil {
				t.Fatal(err)
			}
			s, err := gpu.NewSim(p, "n1", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var gpus []migparted.GPU
			for i := range 8 {
				gpus = append(gpus, migparted.GPU{Index: i, PCIDeviceID: s.PCIDeviceID(i)})
			}
			for name, want := range tt.configs {
				geo, err := cfg.Geometry(name, gpus)
				if err != nil {
					t.Fatal(err)
				}
				if len(geo) != 8 || !maps.Equal(geo[3].Devices, want) || !geo[3].Enabled {
					t.Fatalf("%s: %v, want %v on all 8", name, geo[3], want)
				}
				var reqs []gpu.MIGRequest
				for prof, n := range want {
					reqs = append(reqs, gpu.MIGRequest{Profile: prof, Count: n})
				}
				if err := s.SetMIG(3, true, reqs); err != nil {
					t.Errorf("%s does not fit: %v", name, err)
				}
			}
		})
	}
}

func TestSimMIGDevices(t *testing.T) {
	p, _ := gpu.BuiltinProfile("dgxa100")
	s, err := gpu.NewSim(p, "n1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.SetMIG(0, true, []gpu.MIGRequest{{Profile: "1g.5gb", Count: 7}}); err != nil {
		t.Fatal(err)
	}
	devs, _ := s.MIGDevices(t.Context())
	d := devs[0]
	if len(d) != 7 || d[0].Profile != "1g.5gb" || d[0].MemoryMiB != 4864 || d[0].Start != 0 || d[6].Start != 6 || d[0].SMs != 14 ||
		!strings.HasPrefix(d[0].UUID, "MIG-") || d[0].UUID == d[1].UUID {
		t.Errorf("1g.5gb x7: %+v", d)
	}
	again := d[2].UUID
	s.SetMIG(0, false, nil)
	s.SetMIG(0, true, []gpu.MIGRequest{{Profile: "1g.5gb", Count: 7}})
	if devs, _ := s.MIGDevices(t.Context()); devs[0][2].UUID != again {
		t.Errorf("the same geometry again changed UUIDs: %s, %s", devs[0][2].UUID, again)
	}
	for _, bad := range []struct {
		req  []gpu.MIGRequest
		want string
	}{
		{[]gpu.MIGRequest{{Profile: "1g.5gb", Count: 8}}, "8 MIG 1g.5gb asked, at most 7 fit"},
		{[]gpu.MIGRequest{{Profile: "3g.20gb", Count: 2}, {Profile: "1g.5gb", Count: 1}}, "do not fit"},
		{[]gpu.MIGRequest{{Profile: "1g.10gb+me", Count: 1}}, `has no MIG profile "1g.10gb+me"`},
	} {
		err := s.SetMIG(1, true, bad.req)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: %v, want %q", bad.req, err, bad.want)
		}
	}
	if devs, _ := s.MIGDevices(t.Context()); len(devs) != 1 {
		t.Errorf("a refused geometry changed something: %v", devs)
	}
}

func TestParseStrict(t *testing.T) {
	for _, bad := range []struct{ config, want string }{
		{"version: v1\nmig-configs:\n  x:\n  - devices: all\n    mig-enabled: true\n    mig-devicez: {}\n", "unknown field"},
		{"version: v2\nmig-configs: {x: []}\n", "want v1"},
		{"version: v1\nmig-configs:\n  x:\n  - devices: some\n    mig-enabled: true\n", `mig-configs.x[0].devices: "some"`},
		{"version: v1\nmig-configs:\n  x:\n  - devices: all\n", "mig-configs.x[0].mig-enabled: required"},
		{"version: v1\nmig-configs:\n  x:\n  - device-filter: 0xZZ\n    devices: all\n    mig-enabled: false\n", "not a PCI device id"},
	} {
		if _, err := migparted.Parse([]byte(bad.config)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want %q", bad.config, err, bad.want)
		}
	}
	cfg := migparted.Default()
	if _, err := cfg.Geometry("all-9g.1tb", nil); err == nil || !strings.Contains(err.Error(), `MIG config "all-9g.1tb" not found`) {
		t.Errorf("unknown config: %v", err)
	}
}
