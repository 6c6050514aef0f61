// Package cdi writes the Container Device Interface (CDI) spec through which
// containers get simulated GPUs, and checks that real GPUs have one.
//
// CDI is how a device reaches a container today: a JSON/YAML spec in
// /etc/cdi or /var/run/cdi names devices ("nvidia.com/gpu=0") and the edits
// each one makes to the container's OCI spec (device nodes, mounts, env,
// hooks). The device plugin answers Allocate with CDI names; the runtime
// (runtime/containerd, with tags.cncf.io/container-device-interface) applies
// the edits. For real GPUs NVIDIA's Container Toolkit writes the spec
// (nvidia-ctk cdi generate); for simulated GPUs skiff writes it here:
//
//   - each GPU is a device named by index ("0") and by UUID ("GPU-..."),
//     whose node /dev/nvidiaN is the host's /dev/null (a device that exists
//     everywhere), and which mounts its record file into
//     /run/skiff-gpu/devices/ (see agent/gpu/nvidiasmi);
//   - every container with a GPU also gets /dev/nvidiactl and /dev/nvidia-uvm
//     (again /dev/null), SKIFF_SIMULATED_GPU=1, and a simulated nvidia-smi
//     mounted at /usr/bin/nvidia-smi that shows the records it finds, so
//     exactly the allocated GPUs. (A bind mount creates its target, so this
//     works in images without nvidia-smi, even without /usr/bin.)
//
// Two agents on one machine need two spec directories: both would name
// their devices nvidia.com/gpu=0, and CDI refuses conflicting names.
package cdi

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/specs-go"

	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/agent/gpu/nvidiasmi"
	"skiff.dev/skiff/agent/gpu/usage"
	"skiff.dev/skiff/api/gputopology"
	"skiff.dev/skiff/internal/atomicfile"
)

const (
	// Kind is the CDI vendor/class of NVIDIA GPUs, real or simulated.
	Kind = "nvidia.com/gpu"
	// ScriptPath is where containers find the simulated nvidia-smi.
	ScriptPath = "/usr/bin/nvidia-smi"
	// RecordDir is where, in a container, the records of its GPUs appear.
	RecordDir = "/run/skiff-gpu/devices"
	// GPULoadPath is where containers find the simulated CUDA workload.
	GPULoadPath = "/usr/bin/gpu-load"
	// LoadDir is where, in a container, its devices' load directories appear.
	LoadDir = "/run/skiff-gpu/load"
	// EnvSimulated is set to 1 in containers with simulated GPUs.
	EnvSimulated = "SKIFF_SIMULATED_GPU"
)

// DefaultRealSpecDirs are where nvidia-ctk and the CDI library look for specs.
var DefaultRealSpecDirs = []string{"/etc/cdi", "/var/run/cdi"}

// Config says where the simulated spec and its files go.
type Config struct {
	// NodeName names the spec file (skiff-sim-NODE.yaml) and the data directory.
	NodeName string
	// SpecDir is the CDI spec directory the runtime reads (default
	// /var/run/cdi: CDI's directory for generated, non-persistent specs).
	SpecDir string
	// DataDir holds the nvidia-smi script and the GPU records that the spec
	// mounts (default /var/run/skiff/gpu; files go under DataDir/NODE).
	DataDir string
}

// DefaultConfig for a node.
func DefaultConfig(node string) Config {
	return Config{NodeName: node, SpecDir: "/var/run/cdi", DataDir: "/var/run/skiff/gpu"}
}

// SpecName is the file name of the node's simulated spec.
func (c Config) SpecName() string { return "skiff-sim-" + c.NodeName + ".yaml" }

func (c Config) nodeDir() string { return filepath.Join(c.DataDir, c.NodeName) }

// DeviceName is the fully qualified CDI name of a device: "nvidia.com/gpu=0".
func DeviceName(id string) string { return Kind + "=" + id }

// LoadRoot is the host directory of the simulated loads' domains
// (agent/gpu/usage), mounted into containers under LoadDir.
func (c Config) LoadRoot() string { return filepath.Join(c.nodeDir(), "load") }

// WriteSimSpec writes the records, the scripts (nvidia-smi, gpu-load) and
// the CDI spec of simulated GPUs (host numbering, host matrix), replacing
// earlier ones. Every GPU is a device by index ("0") and by UUID; every
// other device of layout (a replica "<uuid>::<n>", an MPS share, a MIG
// device by UUID and by "GPU:MIG" index as nvidia-ctk names it) is a
// device of its own, with its own record. Each device mounts its record
// and its memory domain's load directory (read-write: gpu-load writes its
// load there). layout nil is every GPU whole. The CDI library validates
// the spec before it is written. It returns the spec's path.
func WriteSimSpec(cfg Config, devs []gpu.Device, layout []gpu.SubDevice, topo *gputopology.Topology) (string, error) {
	if cfg.NodeName == "" || cfg.SpecDir == "" || cfg.DataDir == "" {
		return "", errors.New("write CDI spec: node name, spec dir and data dir are required")
	}
	recDir := filepath.Join(cfg.nodeDir(), "devices")
	if err := os.MkdirAll(recDir, 0o755); err != nil {
		return "", fmt.Errorf("write CDI spec: %w", err)
	}
	whole := gpu.WholeGPUs(devs, Kind)
	if err := usage.PrepareDirs(cfg.LoadRoot(), append(slices.Clone(whole), layout...)); err != nil {
		return "", fmt.Errorf("write CDI spec: %w", err)
	}
	script := filepath.Join(cfg.nodeDir(), "nvidia-smi")
	if err := atomicfile.WriteFile(script, nvidiasmi.DirScript(RecordDir, LoadDir), 0o755); err != nil {
		return "", fmt.Errorf("write CDI spec: %w", err)
	}
	load := filepath.Join(cfg.nodeDir(), "gpu-load")
	if err := atomicfile.WriteFile(load, nvidiasmi.GPULoadScript(RecordDir, LoadDir), 0o755); err != nil {
		return "", fmt.Errorf("write CDI spec: %w", err)
	}
	spec := &specs.Spec{Kind: Kind, ContainerEdits: cfg.commonEdits()}
	byIndex := map[int]gpu.Device{}
	for _, d := range devs {
		byIndex[d.Index] = d
	}
	for _, sd := range whole {
		edits, err := cfg.deviceEdits(recDir, byIndex[sd.ParentIndex], sd, topo)
		if err != nil {
			return "", err
		}
		spec.Devices = append(spec.Devices,
			specs.Device{Name: fmt.Sprint(sd.ParentIndex), ContainerEdits: edits},
			specs.Device{Name: sd.ParentUUID, ContainerEdits: edits})
	}
	for _, sd := range layout {
		if sd.Sharing == gpu.SharingNone {
			continue // the GPU's own device above
		}
		edits, err := cfg.deviceEdits(recDir, byIndex[sd.ParentIndex], sd, topo)
		if err != nil {
			return "", err
		}
		spec.Devices = append(spec.Devices, specs.Device{Name: sd.ID, ContainerEdits: edits})
		if sd.MIG != nil {
			spec.Devices = append(spec.Devices, specs.Device{Name: MIGDeviceName(sd), ContainerEdits: edits})
		}
	}
	version, err := specs.MinimumRequiredVersion(spec)
	if err != nil {
		return "", fmt.Errorf("write CDI spec: %w", err)
	}
	spec.Version = version
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(cfg.SpecDir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		return "", fmt.Errorf("write CDI spec: %w", err)
	}
	if err := cache.WriteSpec(spec, cfg.SpecName()); err != nil {
		return "", fmt.Errorf("write CDI spec: %w", err)
	}
	return filepath.Join(cfg.SpecDir, cfg.SpecName()), nil
}

// commonEdits are what every container with a simulated GPU gets: the
// control device nodes, the simulated nvidia-smi and gpu-load (written by
// WriteSimSpec) and the variable that says the GPUs are simulated.
func (cfg Config) commonEdits() specs.ContainerEdits {
	return specs.ContainerEdits{
		Env: []string{EnvSimulated + "=1"},
		DeviceNodes: []*specs.DeviceNode{
			{Path: "/dev/nvidiactl", HostPath: "/dev/null"},
			{Path: "/dev/nvidia-uvm", HostPath: "/dev/null"},
		},
		Mounts: []*specs.Mount{mount(filepath.Join(cfg.nodeDir(), "nvidia-smi"), ScriptPath), mount(filepath.Join(cfg.nodeDir(), "gpu-load"), GPULoadPath)},
	}
}

// MIGDeviceName is nvidia-ctk's CDI name of a MIG device by index:
// "GPU:MIG" ("0:1"), without the kind.
func MIGDeviceName(sd gpu.SubDevice) string {
	return fmt.Sprintf("%d:%d", sd.ParentIndex, sd.MIG.Index)
}

// deviceEdits writes a device's record and returns its edits: the GPU's
// device node, the record, and its domain's load directory.
func (cfg Config) deviceEdits(recDir string, d gpu.Device, sd gpu.SubDevice, topo *gputopology.Topology) (specs.ContainerEdits, error) {
	name := nvidiasmi.SubRecordName(sd)
	rec := filepath.Join(recDir, name)
	if err := atomicfile.WriteFile(rec, nvidiasmi.SubRecord(d, sd, topo), 0o644); err != nil {
		return specs.ContainerEdits{}, fmt.Errorf("write CDI spec: %w", err)
	}
	nodes := []*specs.DeviceNode{{Path: fmt.Sprintf("/dev/nvidia%d", d.MinorNumber), HostPath: "/dev/null"}}
	return specs.ContainerEdits{
		DeviceNodes: nodes,
		Mounts: []*specs.Mount{
			mount(rec, filepath.Join(RecordDir, name)),
			{HostPath: usage.DomainDir(cfg.LoadRoot(), sd.Domain), ContainerPath: filepath.Join(LoadDir, sd.Domain),
				Options: []string{"rw", "nosuid", "nodev", "noexec", "bind"}},
		},
	}, nil
}

// RemoveSimSpec removes what WriteSimSpec wrote; missing files are fine.
func RemoveSimSpec(cfg Config) error {
	err := os.Remove(filepath.Join(cfg.SpecDir, cfg.SpecName()))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove CDI spec: %w", err)
	}
	if err := os.RemoveAll(cfg.nodeDir()); err != nil {
		return fmt.Errorf("remove CDI data: %w", err)
	}
	return nil
}

// ErrNoRealSpec: no CDI spec describes real nvidia.com/gpu devices.
// ErrSpecDamaged: a CDI spec file does not read (cut short, not YAML or
// JSON, or invalid).
var ErrSpecDamaged = errors.New("CDI spec is damaged")

var ErrNoRealSpec = errors.New("no CDI spec for nvidia.com/gpu; run: sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml")

// RealCDIAvailable checks that the directories hold a valid spec for real
// NVIDIA GPUs (skiff's own simulated specs do not count), as written by
// nvidia-ctk. Without one, containers cannot get real GPUs: it returns
// ErrSpecDamaged naming the spec files that do not read when there are
// any, else ErrNoRealSpec; both say the command that fixes it.
func RealCDIAvailable(dirs ...string) error {
	if len(dirs) == 0 {
		dirs = DefaultRealSpecDirs
	}
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(dirs...), cdiapi.WithAutoRefresh(false))
	if err != nil {
		return fmt.Errorf("read CDI specs in %s: %w", strings.Join(dirs, ", "), err)
	}
	vendor, class, _ := strings.Cut(Kind, "/")
	for _, s := range cache.GetVendorSpecs(vendor) {
		if s.GetClass() == class && !strings.HasPrefix(filepath.Base(s.GetPath()), "skiff-sim-") && len(s.Devices) > 0 {
			return nil
		}
	}
	// No spec that reads: one that does not is the likelier cause.
	var damaged []string
	for path, errs := range cache.GetErrors() {
		damaged = append(damaged, fmt.Sprintf("%s: %v", path, errors.Join(errs...)))
	}
	if len(damaged) > 0 {
		slices.Sort(damaged)
		return fmt.Errorf("%w: %s; regenerate it: sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml (and remove a damaged file that is not nvidia-ctk's)", ErrSpecDamaged, strings.Join(damaged, "; "))
	}
	return fmt.Errorf("%w (looked in %s)", ErrNoRealSpec, strings.Join(dirs, ", "))
}

func mount(host, container string) *specs.Mount {
	return &specs.Mount{HostPath: host, ContainerPath: container, Options: []string{"ro", "nosuid", "nodev", "bind"}}
}
