package gpudriver

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"

	"skiff.dev/skiff/api"
)

// NVIDIA's opaque device configuration (k8s-dra-driver-gpu,
// api/nvidia.com/resource/v1beta1): a claim's or class's
// spec.devices.config[].opaque.parameters for driver gpu.nvidia.com.
// Decoded strictly (an unknown field is an error), normalised, validated
// and applied at prepare, with NVIDIA's words; NVIDIA's feature gates
// TimeSlicingSettings and MPSSupport are on.
const (
	ConfigGroup   = "resource.nvidia.com"
	ConfigVersion = "v1beta1"
	GpuConfigKind = "GpuConfig"

	TimeSlicingStrategy = "TimeSlicing"
	MpsStrategy         = "MPS"

	DefaultTimeSlice = "Default"
	ShortTimeSlice   = "Short"
	MediumTimeSlice  = "Medium"
	LongTimeSlice    = "Long"

	// MPSPipeDirectory is where NVIDIA's driver mounts the MPS control
	// daemon's pipe in the container (CUDA_MPS_PIPE_DIRECTORY).
	MPSPipeDirectory = "/tmp/nvidia-mps"
)

// GpuConfig holds the set of parameters for configuring a GPU.
type GpuConfig struct {
	metav1.TypeMeta `json:",inline"`
	Sharing         *GpuSharing `json:"sharing,omitempty"`
}

// GpuSharing holds the sharing strategy of GPUs and its settings.
type GpuSharing struct {
	Strategy          string             `json:"strategy"`
	TimeSlicingConfig *TimeSlicingConfig `json:"timeSlicingConfig,omitempty"`
	MpsConfig         *MpsConfig         `json:"mpsConfig,omitempty"`
}

// TimeSlicingConfig: the time-slice of the GPU's contexts.
type TimeSlicingConfig struct {
	Interval *string `json:"interval,omitempty"`
}

// MpsConfig: what the MPS control daemon sets for its clients.
type MpsConfig struct {
	DefaultActiveThreadPercentage *int `json:"defaultActiveThreadPercentage,omitempty"`
	// DefaultPinnedDeviceMemoryLimit applies to every device, unless
	// DefaultPerDevicePinnedMemoryLimit names it (by index or UUID).
	DefaultPinnedDeviceMemoryLimit    *resource.Quantity           `json:"defaultPinnedDeviceMemoryLimit,omitempty"`
	DefaultPerDevicePinnedMemoryLimit map[string]resource.Quantity `json:"defaultPerDevicePinnedMemoryLimit,omitempty"`
}

// DeepCopyObject implements runtime.Object (for the decoder's scheme).
func (c *GpuConfig) DeepCopyObject() runtime.Object {
	if c == nil {
		return nil
	}
	out := *c
	if s := c.Sharing; s != nil {
		cp := *s
		if s.TimeSlicingConfig != nil {
			ts := *s.TimeSlicingConfig
			if ts.Interval != nil {
				ts.Interval = ptrTo(*ts.Interval)
			}
			cp.TimeSlicingConfig = &ts
		}
		if s.MpsConfig != nil {
			m := *s.MpsConfig
			if m.DefaultActiveThreadPercentage != nil {
				m.DefaultActiveThreadPercentage = ptrTo(*m.DefaultActiveThreadPercentage)
			}
			if m.DefaultPinnedDeviceMemoryLimit != nil {
				m.DefaultPinnedDeviceMemoryLimit = ptrTo(m.DefaultPinnedDeviceMemoryLimit.DeepCopy())
			}
			if m.DefaultPerDevicePinnedMemoryLimit != nil {
				per := make(map[string]resource.Quantity, len(m.DefaultPerDevicePinnedMemoryLimit))
				for k, v := range m.DefaultPerDevicePinnedMemoryLimit {
					per[k] = v.DeepCopy()
				}
				m.DefaultPerDevicePinnedMemoryLimit = per
			}
			cp.MpsConfig = &m
		}
		out.Sharing = &cp
	}
	return &out
}

func ptrTo[T any](v T) *T { return &v }

// unsupportedKinds are NVIDIA's other config kinds: skiff's driver has no
// MIG device configs, VFIO passthrough or compute domains to apply them to.
var unsupportedKinds = []string{"MigDeviceConfig", "VfioDeviceConfig", "ComputeDomainChannelConfig", "ComputeDomainDaemonConfig"}

// configDecoder is NVIDIA's StrictDecoder: apimachinery's JSON serializer
// over a scheme of the group's kinds, failing on unknown fields.
var configDecoder = func() runtime.Decoder {
	scheme := runtime.NewScheme()
	gv := schema.GroupVersion{Group: ConfigGroup, Version: ConfigVersion}
	scheme.AddKnownTypes(gv, &GpuConfig{})
	metav1.AddToGroupVersion(scheme, gv)
	return kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme, kjson.SerializerOptions{Strict: true})
}()

// DecodeGpuConfig decodes one opaque parameters object as NVIDIA's
// driver does (runtime.Decode with the strict decoder).
func DecodeGpuConfig(raw []byte) (*GpuConfig, error) {
	var tm metav1.TypeMeta
	if gvk, err := kjson.DefaultMetaFactory.Interpret(raw); err == nil {
		tm.APIVersion, tm.Kind = gvk.GroupVersion().String(), gvk.Kind
	}
	if tm.APIVersion == ConfigGroup+"/"+ConfigVersion && slices.Contains(unsupportedKinds, tm.Kind) {
		return nil, fmt.Errorf("%s %s: not supported by skiff's %s driver (only %s)", tm.APIVersion, tm.Kind, DriverName, GpuConfigKind)
	}
	obj, err := runtime.Decode(configDecoder, raw)
	if err != nil {
		return nil, err
	}
	c, ok := obj.(*GpuConfig)
	if !ok {
		return nil, fmt.Errorf("runtime object is not a recognized configuration")
	}
	return c, nil
}

// DefaultGpuConfig is NVIDIA's default with TimeSlicingSettings on:
// time-slicing at the Default interval.
func DefaultGpuConfig() *GpuConfig {
	return &GpuConfig{
		TypeMeta: metav1.TypeMeta{APIVersion: ConfigGroup + "/" + ConfigVersion, Kind: GpuConfigKind},
		Sharing:  &GpuSharing{Strategy: TimeSlicingStrategy, TimeSlicingConfig: &TimeSlicingConfig{Interval: ptrTo(DefaultTimeSlice)}},
	}
}

// Normalize sets the implied defaults: no sharing is time-slicing,
// time-slicing without a config is the Default interval, MPS without a
// config is an empty one. (NVIDIA's driver dereferences a missing
// interval in timeSlicingConfig: {} and crashes; skiff reads it as Default.)
func (c *GpuConfig) Normalize() {
	if c.Sharing == nil {
		c.Sharing = &GpuSharing{Strategy: TimeSlicingStrategy}
	}
	s := c.Sharing
	if s.Strategy == TimeSlicingStrategy {
		if s.TimeSlicingConfig == nil {
			s.TimeSlicingConfig = &TimeSlicingConfig{}
		}
		if s.TimeSlicingConfig.Interval == nil {
			s.TimeSlicingConfig.Interval = ptrTo(DefaultTimeSlice)
		}
	}
	if s.Strategy == MpsStrategy && s.MpsConfig == nil {
		s.MpsConfig = &MpsConfig{}
	}
}

// Validate checks the selected strategy and its settings, in NVIDIA's words.
func (c *GpuConfig) Validate() error {
	s := c.Sharing
	if s == nil {
		return nil
	}
	switch s.Strategy {
	case TimeSlicingStrategy:
		if s.TimeSlicingConfig == nil || s.TimeSlicingConfig.Interval == nil {
			return nil
		}
		return validateInterval(*s.TimeSlicingConfig.Interval)
	case MpsStrategy:
		if s.MpsConfig == nil || s.MpsConfig.DefaultActiveThreadPercentage == nil {
			return nil
		}
		switch p := *s.MpsConfig.DefaultActiveThreadPercentage; {
		case p < 0:
			return errors.New("active thread percentage must not be negative")
		case p > 100:
			return errors.New("active thread percentage must not be greater than 100")
		}
		return nil
	}
	return fmt.Errorf("unknown GPU sharing strategy: %v, supported GPU sharing strategies: %s, %s", s.Strategy, TimeSlicingStrategy, MpsStrategy)
}

func validateInterval(t string) error {
	if TimeSliceInt(t) >= 0 {
		return nil
	}
	return fmt.Errorf("unknown time-slice interval: %v, supported time-slice intervals: %s, %s, %s, %s",
		t, DefaultTimeSlice, ShortTimeSlice, MediumTimeSlice, LongTimeSlice)
}

// TimeSliceInt is the interval as nvidia-smi compute-policy
// --set-timeslice takes it (0 Default, 1 Short, 2 Medium, 3 Long), -1 for
// an unknown one.
func TimeSliceInt(t string) int {
	switch t {
	case DefaultTimeSlice:
		return 0
	case ShortTimeSlice:
		return 1
	case MediumTimeSlice:
		return 2
	case LongTimeSlice:
		return 3
	}
	return -1
}

// timeSlicingConfig is GetTimeSlicingConfig: the config of a time-slicing
// strategy, which must not carry an MPS one.
func (s *GpuSharing) timeSlicingConfig() (*TimeSlicingConfig, error) {
	if s.MpsConfig != nil {
		return nil, fmt.Errorf("cannot use MpsConfig with the '%v' strategy", TimeSlicingStrategy)
	}
	return s.TimeSlicingConfig, nil
}

// mpsConfig is GetMpsConfig.
func (s *GpuSharing) mpsConfig() (*MpsConfig, error) {
	if s.TimeSlicingConfig != nil {
		return nil, fmt.Errorf("cannot use TimeSlicingConfig with the '%v' strategy", MpsStrategy)
	}
	return s.MpsConfig, nil
}

// Errors of the pinned memory limits, as NVIDIA's.
var (
	ErrInvalidDeviceSelector = errors.New("invalid device")
	ErrInvalidLimit          = errors.New("invalid limit")
)

// PinnedLimits turns the MPS config's pinned memory limits into one per
// device (uuids: the devices the config applies to, in the claim's order),
// in MiB written "NM": the default for every device, then the per-device
// ones, named by index into uuids or by UUID. NVIDIA's Normalize.
func (m *MpsConfig) PinnedLimits(uuids []string) (map[string]string, error) {
	out := map[string]string{}
	if m == nil {
		return out, nil
	}
	if q := m.DefaultPinnedDeviceMemoryLimit; q != nil && len(uuids) > 0 {
		mb, ok := megabyte(*q)
		if !ok {
			return nil, fmt.Errorf("%w: default value set too low: %v", ErrInvalidLimit, q)
		}
		for _, u := range uuids {
			out[u] = mb
		}
	}
	keys := make([]string, 0, len(m.DefaultPerDevicePinnedMemoryLimit))
	for k := range m.DefaultPerDevicePinnedMemoryLimit {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := m.DefaultPerDevicePinnedMemoryLimit[k]
		id, err := deviceKey(uuids, k)
		if err != nil {
			return nil, err
		}
		mb, ok := megabyte(v)
		if !ok {
			return nil, fmt.Errorf("%w: value set too low: %v: %v", ErrInvalidLimit, k, &v)
		}
		out[id] = mb
	}
	return out, nil
}

func megabyte(q resource.Quantity) (string, bool) {
	v := q.Value() / 1024 / 1024
	return fmt.Sprintf("%vM", v), v > 0
}

func deviceKey(uuids []string, key string) (string, error) {
	if slices.Contains(uuids, key) {
		return key, nil
	}
	i, err := strconv.Atoi(key)
	if err != nil {
		return "", fmt.Errorf("%w: unable to parse key as an integer: %v", ErrInvalidDeviceSelector, key)
	}
	if i >= 0 && i < len(uuids) {
		return uuids[i], nil
	}
	return "", fmt.Errorf("%w: invalid device index: %v", ErrInvalidDeviceSelector, i)
}

// opaqueConfig is one decoded config and the requests it names.
type opaqueConfig struct {
	requests []string
	config   *GpuConfig
}

// opaqueConfigs decodes the allocation's configs for this driver, the
// class's before the claim's (later ones take precedence), as NVIDIA's
// GetOpaqueDeviceConfigs.
func opaqueConfigs(configs []api.DeviceAllocationConfiguration) ([]opaqueConfig, error) {
	var class, claim []api.DeviceAllocationConfiguration
	for _, c := range configs {
		switch c.Source {
		case api.AllocationConfigSourceClass:
			class = append(class, c)
		case api.AllocationConfigSourceClaim:
			claim = append(claim, c)
		default:
			return nil, fmt.Errorf("invalid config source: %v", c.Source)
		}
	}
	var out []opaqueConfig
	for _, c := range slices.Concat(class, claim) {
		if c.Opaque == nil {
			return nil, errors.New("only opaque parameters are supported by this driver")
		}
		if c.Opaque.Driver != DriverName {
			continue
		}
		cfg, err := DecodeGpuConfig(c.Opaque.Parameters)
		if err != nil {
			return nil, fmt.Errorf("error decoding config parameters: %w", err)
		}
		out = append(out, opaqueConfig{requests: c.Requests, config: cfg})
	}
	return out, nil
}

// configFor picks the config of one allocation result: the last config
// naming its request (or, for firstAvailable, its parent request), else
// the last one naming no request, else the default.
func configFor(configs []opaqueConfig, request string) *GpuConfig {
	parent, _, _ := strings.Cut(request, "/")
	for _, c := range slices.Backward(configs) {
		if slices.Contains(c.requests, request) || slices.Contains(c.requests, parent) || len(c.requests) == 0 {
			return c.config
		}
	}
	return nil
}
