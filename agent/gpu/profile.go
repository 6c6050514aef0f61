package gpu

import (
	"embed"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"skiff.dev/skiff/api/gputopology"
)

// A Profile describes a simulated GPU server: which GPUs, and how they are
// connected. The builtin ones live in profiles/*.yaml; users write their own
// for --gpus sim:FILE.yaml. Example:
//
//	name: rtx4090x4
//	gpus: 4
//	model: {name: NVIDIA GeForce RTX 4090, memoryMiB: 24564, computeCapability: "8.9"}
//	numa: [[0, 1], [2, 3]]
//	pcieSwitches: [[0, 1], [2, 3]]
//
// The PCIe path between two GPUs is the closest group they share:
// pcieSwitches → PIX, pcieBridges → PXB, hostBridges → PHB, numa → NODE,
// none → SYS. NVLinks come from nvswitchLinks (every GPU that many links into
// an NVSwitch fabric: NVk between all pairs) and nvlinks (direct bridges).
type Profile struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Mock takes the GPUs from one of go-nvml's mock servers (dgxa100,
	// dgxh100, dgxh200, dgxb200) instead of GPUs and Model.
	Mock  string `json:"mock,omitempty"`
	GPUs  int    `json:"gpus,omitempty"`
	Model Model  `json:"model,omitzero"`
	// DriverVersion ("550.54.15") and CUDAVersion ("12.4"); a mock brings its own.
	DriverVersion string `json:"driverVersion,omitempty"`
	CUDAVersion   string `json:"cudaVersion,omitempty"`
	// BusIDs of the GPUs in NVML form; default 00000000:01:00.0, :02:00.0, ...
	BusIDs []string `json:"busIDs,omitempty"`
	// NUMA lists the GPUs of each NUMA node (the index is the node number).
	NUMA [][]int `json:"numa,omitempty"`
	// CPUAffinity of each NUMA node, e.g. "0-63,128-191".
	CPUAffinity  []string `json:"cpuAffinity,omitempty"`
	PCIeSwitches [][]int  `json:"pcieSwitches,omitempty"`
	PCIeBridges  [][]int  `json:"pcieBridges,omitempty"`
	HostBridges  [][]int  `json:"hostBridges,omitempty"`
	// NVSwitchLinks is the number of NVLinks of each GPU into NVSwitches.
	NVSwitchLinks int `json:"nvswitchLinks,omitempty"`
	// NVLinks are direct NVLink bridges between pairs of GPUs.
	NVLinks []NVLinkBridge `json:"nvlinks,omitempty"`
}

// Model is the GPU of a profile without a mock; all its GPUs are the same.
type Model struct {
	Name      string `json:"name"`
	MemoryMiB uint64 `json:"memoryMiB"`
	// ComputeCapability is "MAJOR.MINOR", e.g. "8.9".
	ComputeCapability string `json:"computeCapability"`
	// Family, if given, must agree with the compute capability.
	Family string `json:"family,omitempty"`
}

// NVLinkBridge is Count NVLinks between two GPUs.
type NVLinkBridge struct {
	GPUs  [2]int `json:"gpus"`
	Count int    `json:"count"`
}

//go:embed profiles/*.yaml
var builtinFS embed.FS

// mockGPUs is the number of GPUs in each of go-nvml's mock servers.
var mockGPUs = map[string]int{"dgxa100": 8, "dgxa100-80gb": 8, "dgxh100": 8, "dgxh200": 8, "dgxb200": 8}

// maxGPUs bounds a profile; real servers have up to 8 (16 on HGX-2).
const maxGPUs = 16

// BuiltinProfiles lists the names of the embedded profiles.
func BuiltinProfiles() []string {
	entries, _ := builtinFS.ReadDir("profiles")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(names)
	return names
}

// BuiltinProfile returns the embedded profile of that name.
func BuiltinProfile(name string) (*Profile, error) {
	data, err := builtinFS.ReadFile("profiles/" + name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("unknown GPU profile %q (builtin: %s)", name, strings.Join(BuiltinProfiles(), ", "))
	}
	return ParseProfile(data)
}

// LoadProfile reads a profile from a YAML file.
func LoadProfile(path string) (*Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read GPU profile: %w", err)
	}
	p, err := ParseProfile(data)
	if err != nil {
		return nil, fmt.Errorf("GPU profile %s: %w", path, err)
	}
	return p, nil
}

// ParseProfile decodes YAML strictly (an unknown field is an error) and
// validates the result.
func ParseProfile(data []byte) (*Profile, error) {
	var p Profile
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		return nil, fmt.Errorf("decode GPU profile: %w", err)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Count is the number of GPUs of the profile.
func (p *Profile) Count() int {
	if n, ok := mockGPUs[p.Mock]; ok {
		return n
	}
	return p.GPUs
}

var busIDPattern = regexp.MustCompile(`^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$`)

// Validate reports every problem of the profile at once, each naming its field.
func (p *Profile) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if p.Name == "" {
		bad("name: required")
	}
	if p.Mock != "" {
		if _, ok := mockGPUs[p.Mock]; !ok {
			bad("mock: unknown %q (want dgxa100, dgxa100-80gb, dgxh100, dgxh200 or dgxb200)", p.Mock)
		}
		if p.GPUs != 0 || p.Model != (Model{}) {
			bad("gpus, model: not allowed with mock (the mock server brings its GPUs)")
		}
	} else {
		if p.GPUs < 1 || p.GPUs > maxGPUs {
			bad("gpus: %d out of range (1 to %d)", p.GPUs, maxGPUs)
		}
		if p.Model.Name == "" {
			bad("model.name: required")
		}
		if p.Model.MemoryMiB == 0 {
			bad("model.memoryMiB: required")
		}
		major, minor, err := parseCapability(p.Model.ComputeCapability)
		if err != nil {
			bad("model.computeCapability: %v", err)
		} else if f := Family(major, minor); p.Model.Family != "" && p.Model.Family != f {
			bad("model.family: %q does not match compute capability %s (%s)", p.Model.Family, p.Model.ComputeCapability, f)
		}
		if p.DriverVersion == "" {
			bad("driverVersion: required")
		}
		if _, _, err := parseCapability(p.CUDAVersion); err != nil {
			bad("cudaVersion: %v", err)
		}
	}
	n := p.Count()
	if len(p.BusIDs) != 0 && len(p.BusIDs) != n {
		bad("busIDs: %d ids for %d GPUs", len(p.BusIDs), n)
	}
	seen := map[string]int{}
	for i, id := range p.BusIDs {
		if !busIDPattern.MatchString(id) {
			bad("busIDs[%d]: %q is not a PCI bus id like 00000000:07:00.0", i, id)
		}
		if j, dup := seen[strings.ToLower(id)]; dup {
			bad("busIDs[%d]: %q repeats busIDs[%d]", i, id, j)
		}
		seen[strings.ToLower(id)] = i
	}
	for _, g := range []struct {
		field  string
		groups [][]int
	}{{"numa", p.NUMA}, {"pcieSwitches", p.PCIeSwitches}, {"pcieBridges", p.PCIeBridges}, {"hostBridges", p.HostBridges}} {
		errs = append(errs, checkGroups(g.field, g.groups, n)...)
	}
	if len(p.CPUAffinity) > 0 && len(p.CPUAffinity) != len(p.NUMA) {
		bad("cpuAffinity: %d entries for %d NUMA nodes", len(p.CPUAffinity), len(p.NUMA))
	}
	if p.NVSwitchLinks < 0 || p.NVSwitchLinks > 18 {
		bad("nvswitchLinks: %d out of range (0 to 18)", p.NVSwitchLinks)
	}
	for i, b := range p.NVLinks {
		for _, g := range b.GPUs {
			if g < 0 || g >= n {
				bad("nvlinks[%d].gpus: GPU %d out of range (the profile has %d GPUs)", i, g, n)
			}
		}
		if b.GPUs[0] == b.GPUs[1] {
			bad("nvlinks[%d].gpus: a GPU cannot link to itself", i)
		}
		if b.Count < 1 || b.Count > 18 {
			bad("nvlinks[%d].count: %d out of range (1 to 18)", i, b.Count)
		}
	}
	return errors.Join(errs...)
}

// checkGroups: every GPU in range and in at most one group.
func checkGroups(field string, groups [][]int, n int) []error {
	var errs []error
	where := map[int]int{}
	for gi, g := range groups {
		for k, gpu := range g {
			if gpu < 0 || gpu >= n {
				errs = append(errs, fmt.Errorf("%s[%d][%d]: GPU %d out of range (the profile has %d GPUs)", field, gi, k, gpu, n))
				continue
			}
			if prev, dup := where[gpu]; dup {
				errs = append(errs, fmt.Errorf("%s[%d]: GPU %d is already in %s[%d]", field, gi, gpu, field, prev))
			}
			where[gpu] = gi
		}
	}
	return errs
}

// parseCapability reads "8.9" as (8, 9).
func parseCapability(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, ".")
	major, err1 := strconv.Atoi(a)
	minor, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || major < 0 || minor < 0 {
		return 0, 0, fmt.Errorf("%q is not MAJOR.MINOR", s)
	}
	return major, minor, nil
}

// group returns the index of the group holding gpu, or -1.
func group(groups [][]int, gpu int) int {
	for i, g := range groups {
		if slices.Contains(g, gpu) {
			return i
		}
	}
	return -1
}

// pciePath is the closest group GPUs i and j share.
func (p *Profile) pciePath(i, j int) gputopology.PCIePath {
	same := func(groups [][]int) bool {
		g := group(groups, i)
		return g >= 0 && g == group(groups, j)
	}
	switch {
	case same(p.PCIeSwitches):
		return gputopology.PIX
	case same(p.PCIeBridges):
		return gputopology.PXB
	case same(p.HostBridges):
		return gputopology.PHB
	case same(p.NUMA):
		return gputopology.NODE
	}
	return gputopology.SYS
}

// busID of GPU i: from the profile, or a made-up one (bus i+1).
func (p *Profile) busID(i int) string {
	if i < len(p.BusIDs) {
		domain, rest, _ := strings.Cut(p.BusIDs[i], ":")
		d, _ := strconv.ParseUint(domain, 16, 32) // Validate checked the form
		return fmt.Sprintf("%08X:%s", d, strings.ToUpper(rest))
	}
	return fmt.Sprintf("00000000:%02X:00.0", i+1)
}

// numa returns the NUMA node and CPU affinity of GPU i (-1, "" when unknown).
func (p *Profile) numa(i int) (int, string) {
	node := group(p.NUMA, i)
	if node >= 0 && node < len(p.CPUAffinity) {
		return node, p.CPUAffinity[node]
	}
	return node, ""
}
