package gpudriver_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"skiff.dev/skiff/agent/dra/gpudriver"
	"skiff.dev/skiff/agent/gpu/cdi"
	"skiff.dev/skiff/api"
)

// configured is an allocated claim of one device per request (gpu-0,
// gpu-1, ... in order) with the given config entries (claim's, unless
// source says FromClass), parameters as YAML.
type cfgEntry struct {
	source, driver string
	requests       []string
	params         string // YAML; "" with driver "": a config that is not opaque
}

func configured(t *testing.T, name, uid string, requests []string, entries ...cfgEntry) *api.ResourceClaim {
	t.Helper()
	c := claim(name, uid, node)
	c.Status.Allocation = &api.AllocationResult{}
	for i, r := range requests {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			api.DeviceRequestAllocationResult{Request: r, Driver: gpudriver.DriverName, Pool: node, Device: "gpu-" + string(rune('0'+i))})
	}
	for _, e := range entries {
		ac := api.DeviceAllocationConfiguration{Source: api.AllocationConfigSourceClaim, Requests: e.requests}
		if e.source != "" {
			ac.Source = e.source
		}
		if e.driver != "" {
			js, err := yaml.YAMLToJSON([]byte(e.params))
			if err != nil {
				t.Fatal(err)
			}
			ac.Opaque = &api.OpaqueDeviceConfiguration{Driver: e.driver, Parameters: js}
		}
		c.Status.Allocation.Devices.Config = append(c.Status.Allocation.Devices.Config, ac)
	}
	return c
}

func gpuConfig(sharing string) string {
	return "apiVersion: resource.nvidia.com/v1beta1\nkind: GpuConfig\n" + sharing
}

func nvidia(requests []string, params string) cfgEntry {
	return cfgEntry{driver: gpudriver.DriverName, requests: requests, params: params}
}

// TestGpuConfigRefused: every way NVIDIA's driver refuses a GpuConfig,
// with its words, after the claim (NVIDIA's "error preparing devices for
// claim NS/NAME:UID: prepare devices failed: ..."); nothing is prepared,
// no CDI spec written, no GPU held.
func TestGpuConfigRefused(t *testing.T) {
	const prefix = "error preparing devices for claim default/c:uid-c: prepare devices failed: "
	for _, tc := range []struct {
		name    string
		entries []cfgEntry
		want    string
	}{
		{"unknown strategy", []cfgEntry{nvidia(nil, gpuConfig("sharing:\n  strategy: SpaceSlicing\n"))},
			"error validating GPU config: unknown GPU sharing strategy: SpaceSlicing, supported GPU sharing strategies: TimeSlicing, MPS"},
		{"no strategy", []cfgEntry{nvidia(nil, gpuConfig("sharing: {}\n"))},
			"error validating GPU config: unknown GPU sharing strategy: , supported GPU sharing strategies: TimeSlicing, MPS"},
		{"unknown interval", []cfgEntry{nvidia(nil, gpuConfig("sharing:\n  strategy: TimeSlicing\n  timeSlicingConfig:\n    interval: Forever\n"))},
			"error validating GPU config: unknown time-slice interval: Forever, supported time-slice intervals: Default, Short, Medium, Long"},
		{"negative percentage", []cfgEntry{nvidia(nil, gpuConfig("sharing:\n  strategy: MPS\n  mpsConfig:\n    defaultActiveThreadPercentage: -1\n"))},
			"error validating GPU config: active thread percentage must not be negative"},
		{"percentage over 100", []cfgEntry{nvidia(nil, gpuConfig("sharing:\n  strategy: MPS\n  mpsConfig:\n    defaultActiveThreadPercentage: 101\n"))},
			"error validating GPU config: active thread percentage must not be greater than 100"},
		{"time-slicing with an MPS config", []cfgEntry{nvidia([]string{"gpu"}, gpuConfig("sharing:\n  strategy: TimeSlicing\n  mpsConfig:\n    defaultActiveThreadPercentage: 50\n"))},
			"error applying config: error getting timeslice config for requests '[gpu]' in claim 'uid-c': cannot use MpsConfig with the 'TimeSlicing' strategy"},
		{"MPS with a time-slicing config", []cfgEntry{nvidia(nil, gpuConfig("sharing:\n  strategy: MPS\n  timeSlicingConfig:\n    interval: Long\n"))},
			"error applying config: error getting MPS configuration: cannot use TimeSlicingConfig with the 'MPS' strategy"},
		{"default pinned limit under 1 MiB", []cfgEntry{nvidia(nil, gpuConfig("sharing:\n  strategy: MPS\n  mpsConfig:\n    defaultPinnedDeviceMemoryLimit: 512Ki\n"))},
			"error applying config: error starting MPS control daemon: error transforming DefaultPerDevicePinnedMemoryLimit into string: invalid limit: default value set too low: 512Ki"},
		{"per-device key not an index", []cfgEntry{nvidia(nil, gpuConfig("sharing:\n  strategy: MPS\n  mpsConfig:\n    defaultPerDevicePinnedMemoryLimit:\n      first: 1Gi\n"))},
			"error transforming DefaultPerDevicePinnedMemoryLimit into string: invalid device: unable to parse key as an integer: first"},
		{"per-device index out of range", []cfgEntry{nvidia(nil, gpuConfig("sharing:\n  strategy: MPS\n  mpsConfig:\n    defaultPerDevicePinnedMemoryLimit:\n      \"5\": 1Gi\n"))},
			"error transforming DefaultPerDevicePinnedMemoryLimit into string: invalid device: invalid device index: 5"},
		{"per-device limit under 1 MiB", []cfgEntry{nvidia(nil, gpuConfig("sharing:\n  strategy: MPS\n  mpsConfig:\n    defaultPerDevicePinnedMemoryLimit:\n      \"0\": 1Ki\n"))},
			"error transforming DefaultPerDevicePinnedMemoryLimit into string: invalid limit: value set too low: 0: 1Ki"},
		{"unknown field", []cfgEntry{nvidia(nil, gpuConfig("sharing:\n  strategy: MPS\n  mpsConfig:\n    threads: 50\n"))},
			`error getting opaque device configs: error decoding config parameters: strict decoding error: unknown field "sharing.mpsConfig.threads"`},
		{"wrong type", []cfgEntry{nvidia(nil, gpuConfig("sharing:\n  strategy: MPS\n  mpsConfig:\n    defaultActiveThreadPercentage: \"50\"\n"))},
			"error decoding config parameters: json: cannot unmarshal string into Go struct field"},
		{"unknown kind", []cfgEntry{nvidia(nil, "apiVersion: resource.nvidia.com/v1beta1\nkind: GPUConfig\n")},
			`error decoding config parameters: no kind "GPUConfig" is registered for version "resource.nvidia.com/v1beta1"`},
		{"no kind", []cfgEntry{nvidia(nil, "apiVersion: resource.nvidia.com/v1beta1\nsharing:\n  strategy: MPS\n")},
			"error decoding config parameters: Object 'Kind' is missing in"},
		{"a kind skiff lacks", []cfgEntry{nvidia(nil, "apiVersion: resource.nvidia.com/v1beta1\nkind: MigDeviceConfig\n")},
			"error decoding config parameters: resource.nvidia.com/v1beta1 MigDeviceConfig: not supported by skiff's gpu.nvidia.com driver (only GpuConfig)"},
		{"not opaque", []cfgEntry{{}},
			"error getting opaque device configs: only opaque parameters are supported by this driver"},
		{"a bad class config", []cfgEntry{{source: api.AllocationConfigSourceClass, driver: gpudriver.DriverName, params: gpuConfig("sharing:\n  strategy: Exclusive\n")}},
			"unknown GPU sharing strategy: Exclusive"},
		{"a bad config after a good one", []cfgEntry{
			nvidia([]string{"gpu"}, gpuConfig("sharing:\n  strategy: TimeSlicing\n  timeSlicingConfig:\n    interval: Long\n")),
			nvidia([]string{"other"}, gpuConfig("sharing:\n  strategy: MPS\n  mpsConfig:\n    defaultActiveThreadPercentage: 200\n"))},
			"active thread percentage must not be greater than 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := setUp(t, configured(t, "c", "uid-c", []string{"gpu", "other"}, tc.entries...))
			_, err := f.d.Prepare(context.Background(), gpudriver.ClaimRef{Namespace: "default", Name: "c", UID: "uid-c"})
			if err == nil || !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error\n  %v\nwant %q after %q", err, tc.want, prefix)
			}
			t.Log(err)
			if p := f.d.Prepared(); len(p) != 0 {
				t.Errorf("prepared %v after a refused config", p)
			}
			if h := f.d.Held(); len(h) != 0 {
				t.Errorf("held %v after a refused config", h)
			}
			if _, err := os.Stat(filepath.Join(f.cdiDir, cdi.ClaimSpecName("uid-c"))); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a CDI spec was written: %v", err)
			}
		})
	}
}

// TestGpuConfigApplied: NVIDIA's quick-start gpu-test5 config (one
// time-sliced, one MPS request) and the defaults, in the claim's CDI spec.
func TestGpuConfigApplied(t *testing.T) {
	ts := gpuConfig("sharing:\n  strategy: TimeSlicing\n  timeSlicingConfig:\n    interval: Long\n")
	mps := gpuConfig("sharing:\n  strategy: MPS\n  mpsConfig:\n    defaultActiveThreadPercentage: 50\n    defaultPinnedDeviceMemoryLimit: 10Gi\n")
	for _, tc := range []struct {
		name     string
		requests []string
		entries  []cfgEntry
		want     map[string][]string // device → its env beyond DRA_CLAIM_GPU_N
		absent   []string
	}{
		{"gpu-test5", []string{"ts-gpu", "mps-gpu"}, []cfgEntry{nvidia([]string{"ts-gpu"}, ts), nvidia([]string{"mps-gpu"}, mps)},
			map[string][]string{
				"gpu-0": {"DRA_CLAIM_GPU_0_SHARING=TimeSlicing/Long"},
				"gpu-1": {"DRA_CLAIM_GPU_1_SHARING=MPS", "CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=10240M"},
			}, nil},
		{"no config: time-slicing at Default", []string{"gpu"}, nil,
			map[string][]string{"gpu-0": {"DRA_CLAIM_GPU_0_SHARING=TimeSlicing/Default"}}, []string{"CUDA_MPS_"}},
		{"another driver's config is skipped", []string{"gpu"}, []cfgEntry{{driver: "nic.example.com", params: "anything: goes"}},
			map[string][]string{"gpu-0": {"DRA_CLAIM_GPU_0_SHARING=TimeSlicing/Default"}}, nil},
		{"the claim's config over the class's", []string{"gpu"}, []cfgEntry{
			{source: api.AllocationConfigSourceClass, driver: gpudriver.DriverName, params: mps}, nvidia([]string{"gpu"}, ts)},
			map[string][]string{"gpu-0": {"DRA_CLAIM_GPU_0_SHARING=TimeSlicing/Long"}}, []string{"CUDA_MPS_"}},
		{"MPS without settings", []string{"gpu"}, []cfgEntry{nvidia(nil, gpuConfig("sharing:\n  strategy: MPS\n"))},
			map[string][]string{"gpu-0": {"DRA_CLAIM_GPU_0_SHARING=MPS", "CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps"}},
			[]string{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"}},
		{"per-device limits by index", []string{"a", "a"}, []cfgEntry{nvidia(nil, gpuConfig(
			"sharing:\n  strategy: MPS\n  mpsConfig:\n    defaultPinnedDeviceMemoryLimit: 10Gi\n    defaultPerDevicePinnedMemoryLimit:\n      \"1\": 2Gi\n"))},
			map[string][]string{"gpu-1": {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=10240M,1=2048M"}}, nil},
		{"a firstAvailable subrequest takes its request's config", []string{"gpu/fast"}, []cfgEntry{nvidia([]string{"gpu"}, ts)},
			map[string][]string{"gpu-0": {"DRA_CLAIM_GPU_0_SHARING=TimeSlicing/Long"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := setUp(t, configured(t, "c", "uid-c", tc.requests, tc.entries...))
			if _, err := f.d.Prepare(context.Background(), gpudriver.ClaimRef{Namespace: "default", Name: "c", UID: "uid-c"}); err != nil {
				t.Fatal(err)
			}
			envs := claimSpecEnv(t, f.cdiDir, "uid-c")
			for dev, want := range tc.want {
				for _, w := range want {
					if !slices.Contains(envs[dev], w) {
						t.Errorf("%s: no %s in %v", dev, w, envs[dev])
					}
				}
			}
			for dev, env := range envs {
				for _, a := range tc.absent {
					for _, e := range env {
						if strings.HasPrefix(e, a) {
							t.Errorf("%s: %s, want no %s", dev, e, a)
						}
					}
				}
			}
		})
	}
}

// claimSpecEnv reads a claim's CDI spec: each device's environment.
func claimSpecEnv(t *testing.T, dir, uid string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, cdi.ClaimSpecName(uid)))
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Devices []struct {
			Name           string
			ContainerEdits struct{ Env []string } `json:"containerEdits"`
		}
	}
	if err := yaml.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, d := range spec.Devices {
		out[strings.TrimPrefix(d.Name, uid+"-")] = d.ContainerEdits.Env
	}
	return out
}

func TestTimeSliceInt(t *testing.T) {
	for in, want := range map[string]int{"Default": 0, "Short": 1, "Medium": 2, "Long": 3, "long": -1, "": -1} {
		if got := gpudriver.TimeSliceInt(in); got != want {
			t.Errorf("TimeSliceInt(%q) = %d, want %d", in, got, want)
		}
	}
}
