package api

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// HAMi's device config, as its Helm chart installs it (release "hami" in
// kube-system): ConfigMap hami-scheduler-device, key device-config.yaml,
// read by HAMi's scheduler and device plugin (`nvidia:` and a section per
// other vendor), and ConfigMap hami-device-plugin, key config.json, the
// device plugin's per-node overrides (`nodeconfig:`). skiff reads both
// live: the agent of a HAMi node its split count, memory and core
// scaling and filtered devices, the scheduler its defaults. A config
// that does not parse or names a value skiff does not implement is
// refused whole, naming the field; the last good one stays.
const (
	HAMiConfigNamespace     = "kube-system"
	HAMiDeviceConfigMap     = "hami-scheduler-device"
	HAMiDeviceConfigKey     = "device-config.yaml"
	HAMiNodeConfigMap       = "hami-device-plugin"
	HAMiNodeConfigKey       = "config.json"
	HAMiEnvOversubscribe    = "CUDA_OVERSUBSCRIBE" // "true" when deviceMemoryScaling > 1
	hamiDefaultLibCudaLevel = 1
)

// HAMiDeviceConfig is device-config.yaml. Only `nvidia:` configures
// anything on skiff; the other vendors' sections (the chart writes them
// all) are accepted as they are, for devices skiff does not have.
type HAMiDeviceConfig struct {
	Nvidia HAMiNvidiaConfig `json:"nvidia"`

	Cambricon json.RawMessage `json:"cambricon,omitempty"`
	Hygon     json.RawMessage `json:"hygon,omitempty"`
	Metax     json.RawMessage `json:"metax,omitempty"`
	Enflame   json.RawMessage `json:"enflame,omitempty"`
	Mthreads  json.RawMessage `json:"mthreads,omitempty"`
	Iluvatar  json.RawMessage `json:"iluvatar,omitempty"`
	Iluvatars json.RawMessage `json:"iluvatars,omitempty"`
	Kunlun    json.RawMessage `json:"kunlun,omitempty"`
	AWSNeuron json.RawMessage `json:"awsneuron,omitempty"`
	AMD       json.RawMessage `json:"amd,omitempty"`
	Vastai    json.RawMessage `json:"vastai,omitempty"`
	Biren     json.RawMessage `json:"biren,omitempty"`
	Vnpus     json.RawMessage `json:"vnpus,omitempty"`
}

// HAMiNvidiaConfig is the `nvidia:` section (HAMi's NvidiaConfig and
// what its chart writes there).
type HAMiNvidiaConfig struct {
	ResourceCountName            string `json:"resourceCountName,omitempty"`
	ResourceMemoryName           string `json:"resourceMemoryName,omitempty"`
	ResourceMemoryPercentageName string `json:"resourceMemoryPercentageName,omitempty"`
	ResourceCoreName             string `json:"resourceCoreName,omitempty"`
	ResourcePriorityName         string `json:"resourcePriorityName,omitempty"`
	OverwriteEnv                 bool   `json:"overwriteEnv,omitempty"`
	// DefaultMemory (MiB; 0: the whole card) and DefaultCores (percent)
	// are what a container asking only nvidia.com/gpu gets per card.
	DefaultMemory int32 `json:"defaultMemory,omitempty"`
	DefaultCores  int32 `json:"defaultCores,omitempty"`
	// DefaultGPUNum: the cards a container asking memory or cores but
	// no nvidia.com/gpu is given by HAMi's webhook.
	DefaultGPUNum             *int32 `json:"defaultGPUNum,omitempty"`
	PreConfiguredDeviceMemory int64  `json:"preConfiguredDeviceMemory,omitempty"`
	MemoryFactor              *int32 `json:"memoryFactor,omitempty"`
	// DeviceSplitCount: slices per GPU (nvidia.com/gpu = GPUs × it);
	// DeviceMemoryScaling: the registered memory is the GPU's × it (> 1
	// oversubscribes); DeviceCoreScaling: cores registered 100 × it.
	DeviceSplitCount    *int64   `json:"deviceSplitCount,omitempty"`
	DeviceMemoryScaling *float64 `json:"deviceMemoryScaling,omitempty"`
	DeviceCoreScaling   *float64 `json:"deviceCoreScaling,omitempty"`
	EnableNumaTopology  bool     `json:"enableNumaTopology,omitempty"`
	DisableCoreLimit    bool     `json:"disableCoreLimit,omitempty"`
	GPUCorePolicy       string   `json:"gpuCorePolicy,omitempty"`
	LibCudaLogLevel     *int     `json:"libCudaLogLevel,omitempty"`
	RuntimeClassName    string   `json:"runtimeClassName,omitempty"`
	// The MIG geometries HAMi's MIG mode may use: only with a node's
	// migstrategy mixed, which skiff refuses; so they decide nothing.
	KnownMigGeometries  []HAMiMigGeometries `json:"knownMigGeometries,omitempty"`
	MigProfileAllowlist []HAMiMigAllowlist  `json:"migProfileAllowlist,omitempty"`
}

// HAMiMigGeometries is one entry of knownMigGeometries.
type HAMiMigGeometries struct {
	Models            []string        `json:"models"`
	AllowedGeometries json.RawMessage `json:"allowedGeometries"`
}

// HAMiMigAllowlist is one entry of migProfileAllowlist.
type HAMiMigAllowlist struct {
	Models   []string `json:"models"`
	Profiles []string `json:"profiles"`
}

// HAMiNodeConfigs is the device plugin's config.json.
type HAMiNodeConfigs struct {
	NodeConfig []HAMiNodeConfig `json:"nodeconfig"`
}

// HAMiNodeConfig overrides the device config for the node Name; a zero
// number is not overridden (as HAMi's plugin reads it).
type HAMiNodeConfig struct {
	Name                string            `json:"name"`
	OperatingMode       string            `json:"operatingmode,omitempty"`
	DeviceMemoryScaling float64           `json:"devicememoryscaling,omitempty"`
	DeviceCoreScaling   float64           `json:"devicecorescaling,omitempty"`
	DeviceSplitCount    int64             `json:"devicesplitcount,omitempty"`
	MigStrategy         string            `json:"migstrategy,omitempty"`
	FilterDevices       *HAMiFilterDevice `json:"filterdevices,omitempty"`
}

// HAMiFilterDevice lists GPUs the node does not register, by UUID or index.
type HAMiFilterDevice struct {
	UUID  []string `json:"uuid"`
	Index []uint   `json:"index"`
}

// HAMiNodeSettings is what a HAMi node registers under the config in
// force: comparable, so a change is seen.
type HAMiNodeSettings struct {
	SplitCount    int     `json:"splitCount"`
	MemoryScaling float64 `json:"memoryScaling"`
	CoreScaling   float64 `json:"coreScaling"`
	// Filtered: the UUIDs and indexes not registered, comma-separated.
	FilterUUIDs   string `json:"filterUUIDs,omitempty"`
	FilterIndexes string `json:"filterIndexes,omitempty"`
}

// HAMiDefaultNodeSettings are HAMi's chart's defaults: 10 slices, no
// scaling.
func HAMiDefaultNodeSettings() HAMiNodeSettings {
	return HAMiNodeSettings{SplitCount: HAMiDeviceSplitCount, MemoryScaling: 1, CoreScaling: 1}
}

// HAMiRequestDefaults are the device config's defaults for a container
// that asks only nvidia.com/gpu.
type HAMiRequestDefaults struct {
	Memory int32 // MiB per card; 0: the whole card
	Cores  int32 // percent per card
}

// RequestDefaults are c's (HAMi's: none when c is nil).
func (c *HAMiDeviceConfig) RequestDefaults() HAMiRequestDefaults {
	if c == nil {
		return HAMiRequestDefaults{}
	}
	return HAMiRequestDefaults{Memory: c.Nvidia.DefaultMemory, Cores: c.Nvidia.DefaultCores}
}

// ParseHAMiDeviceConfig decodes and checks device-config.yaml: unknown
// fields and values skiff does not implement are errors naming their
// path (nvidia.deviceSplitCount: ...).
func ParseHAMiDeviceConfig(data []byte) (*HAMiDeviceConfig, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", HAMiDeviceConfigKey, err)
	}
	var c HAMiDeviceConfig
	if err := UnmarshalStrict(js, &c); err != nil {
		return nil, err
	}
	if errs := c.validate(); len(errs) > 0 {
		return nil, errs
	}
	return &c, nil
}

func (c *HAMiDeviceConfig) validate() FieldErrors {
	var errs FieldErrors
	n := &c.Nvidia
	for _, f := range []struct{ path, got, want string }{
		{"nvidia.resourceCountName", n.ResourceCountName, ResourceNvidiaGPU},
		{"nvidia.resourceMemoryName", n.ResourceMemoryName, HAMiResourceMem},
		{"nvidia.resourceMemoryPercentageName", n.ResourceMemoryPercentageName, HAMiResourceMemPercentage},
		{"nvidia.resourceCoreName", n.ResourceCoreName, HAMiResourceCores},
		{"nvidia.resourcePriorityName", n.ResourcePriorityName, HAMiResourcePriority},
	} {
		if f.got != "" && f.got != f.want {
			errs = append(errs, NotSupported(f.path, f.got, f.want))
		}
	}
	if n.DefaultMemory < 0 {
		errs = append(errs, Invalid("nvidia.defaultMemory", n.DefaultMemory, "must be 0 (the whole card) or more MiB"))
	}
	if n.DefaultCores < 0 || n.DefaultCores > 100 {
		errs = append(errs, Invalid("nvidia.defaultCores", n.DefaultCores, "must be between 0 and 100"))
	}
	if n.DefaultGPUNum != nil && *n.DefaultGPUNum != 1 {
		errs = append(errs, NotSupported("nvidia.defaultGPUNum", *n.DefaultGPUNum, "1"))
	}
	if s := n.DeviceSplitCount; s != nil && (*s < 1 || *s > 1000) {
		errs = append(errs, Invalid("nvidia.deviceSplitCount", *s, "must be between 1 and 1000"))
	}
	errs = append(errs, checkScaling("nvidia.deviceMemoryScaling", n.DeviceMemoryScaling)...)
	errs = append(errs, checkScaling("nvidia.deviceCoreScaling", n.DeviceCoreScaling)...)
	// What skiff does not implement: refused unless at the chart's default.
	unsupported := func(path string, v any) {
		errs = append(errs, Invalid(path, v, "not supported by skiff's HAMi (only the chart's default)"))
	}
	if n.OverwriteEnv {
		unsupported("nvidia.overwriteEnv", true)
	}
	if n.PreConfiguredDeviceMemory != 0 {
		unsupported("nvidia.preConfiguredDeviceMemory", n.PreConfiguredDeviceMemory)
	}
	if n.MemoryFactor != nil && *n.MemoryFactor != 1 {
		unsupported("nvidia.memoryFactor", *n.MemoryFactor)
	}
	if n.EnableNumaTopology {
		unsupported("nvidia.enableNumaTopology", true)
	}
	if n.DisableCoreLimit {
		unsupported("nvidia.disableCoreLimit", true)
	}
	if n.GPUCorePolicy != "" && n.GPUCorePolicy != "default" {
		unsupported("nvidia.gpuCorePolicy", n.GPUCorePolicy)
	}
	if n.LibCudaLogLevel != nil && *n.LibCudaLogLevel != hamiDefaultLibCudaLevel {
		unsupported("nvidia.libCudaLogLevel", *n.LibCudaLogLevel)
	}
	if n.RuntimeClassName != "" {
		unsupported("nvidia.runtimeClassName", n.RuntimeClassName)
	}
	return errs
}

func checkScaling(path string, v *float64) FieldErrors {
	if v == nil {
		return nil
	}
	if math.IsNaN(*v) || *v <= 0 || *v > 100 {
		return FieldErrors{Invalid(path, *v, "must be more than 0 and at most 100")}
	}
	return nil
}

// ParseHAMiNodeConfigs decodes and checks config.json.
func ParseHAMiNodeConfigs(data []byte) (*HAMiNodeConfigs, error) {
	js, err := yaml.YAMLToJSON(data) // JSON is YAML: one decoder
	if err != nil {
		return nil, fmt.Errorf("%s: %v", HAMiNodeConfigKey, err)
	}
	var c HAMiNodeConfigs
	if err := UnmarshalStrict(js, &c); err != nil {
		return nil, err
	}
	var errs FieldErrors
	for i, nc := range c.NodeConfig {
		p := fmt.Sprintf("nodeconfig[%d]", i)
		if nc.Name == "" {
			errs = append(errs, Required(p+".name", "the node's name"))
		}
		if nc.OperatingMode != "" && nc.OperatingMode != "hami-core" {
			errs = append(errs, NotSupported(p+".operatingmode", nc.OperatingMode, "hami-core"))
		}
		if nc.MigStrategy != "" && nc.MigStrategy != "none" {
			errs = append(errs, NotSupported(p+".migstrategy", nc.MigStrategy, "none"))
		}
		if nc.DeviceSplitCount < 0 || nc.DeviceSplitCount > 1000 {
			errs = append(errs, Invalid(p+".devicesplitcount", nc.DeviceSplitCount, "must be between 1 and 1000 (0: not overridden)"))
		}
		for _, s := range []struct {
			path string
			v    float64
		}{{p + ".devicememoryscaling", nc.DeviceMemoryScaling}, {p + ".devicecorescaling", nc.DeviceCoreScaling}} {
			if s.v != 0 {
				errs = append(errs, checkScaling(s.path, &s.v)...)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return &c, nil
}

// NodeSettings are what node registers under dc (nil: HAMi's defaults)
// and its entry in nc (nil: none), as HAMi's plugin resolves them: the
// node's non-zero numbers over the device config's over the defaults.
func NodeSettings(dc *HAMiDeviceConfig, nc *HAMiNodeConfigs, node string) HAMiNodeSettings {
	s := HAMiDefaultNodeSettings()
	if dc != nil {
		if v := dc.Nvidia.DeviceSplitCount; v != nil {
			s.SplitCount = int(*v)
		}
		if v := dc.Nvidia.DeviceMemoryScaling; v != nil {
			s.MemoryScaling = *v
		}
		if v := dc.Nvidia.DeviceCoreScaling; v != nil {
			s.CoreScaling = *v
		}
	}
	if nc == nil {
		return s
	}
	i := slices.IndexFunc(nc.NodeConfig, func(c HAMiNodeConfig) bool { return c.Name == node })
	if i < 0 {
		return s
	}
	c := nc.NodeConfig[i]
	if c.DeviceSplitCount > 0 {
		s.SplitCount = int(c.DeviceSplitCount)
	}
	if c.DeviceMemoryScaling > 0 {
		s.MemoryScaling = c.DeviceMemoryScaling
	}
	if c.DeviceCoreScaling > 0 {
		s.CoreScaling = c.DeviceCoreScaling
	}
	if f := c.FilterDevices; f != nil {
		s.FilterUUIDs = strings.Join(f.UUID, ",")
		idx := make([]string, len(f.Index))
		for j, x := range f.Index {
			idx[j] = fmt.Sprint(x)
		}
		s.FilterIndexes = strings.Join(idx, ",")
	}
	return s
}

// Filtered reports whether the GPU (uuid, index) is not registered.
func (s HAMiNodeSettings) Filtered(uuid string, index int) bool {
	return containsComma(s.FilterUUIDs, uuid) || containsComma(s.FilterIndexes, fmt.Sprint(index))
}

// ScaledMemory is the memory registered for a GPU of mib MiB (at most
// the int32 of HAMi's annotation).
func (s HAMiNodeSettings) ScaledMemory(mib int64) int32 {
	return int32(min(float64(mib)*s.MemoryScaling, math.MaxInt32))
}

// ScaledCores are the cores registered per GPU (100 × the scaling).
func (s HAMiNodeSettings) ScaledCores() int32 {
	return int32(min(100*s.CoreScaling, math.MaxInt32))
}

func containsComma(list, v string) bool {
	return list != "" && slices.Contains(strings.Split(list, ","), v)
}
