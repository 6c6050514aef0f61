// Package migparted reads NVIDIA's mig-parted config (version: v1,
// mig-configs:), the file the GPU operator's MIG manager applies: named
// geometries, each a list of entries that select GPUs (device-filter by
// PCI device id, devices: all or indices) and say whether MIG is enabled
// on them and which MIG devices they get.
//
//	version: v1
//	mig-configs:
//	  all-1g.5gb:
//	    - devices: all
//	      mig-enabled: true
//	      mig-devices:
//	        "1g.5gb": 7
//
// Default is skiff's built-in config (default.yaml: the GPU operator's
// config names for the GPUs skiff simulates); a ConfigMap may replace it.
// Parse decodes strictly: an unknown field or a wrong value is an error
// naming its path.
package migparted

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// Config is a mig-parted config.
type Config struct {
	Version    string
	MigConfigs map[string][]Spec
}

// Spec is one entry of a named config.
type Spec struct {
	// DeviceFilter lists PCI device ids ("0x20B010DE"); empty: every GPU.
	DeviceFilter []uint32
	// Devices are the GPU indices it applies to; nil: all.
	Devices    []int
	MigEnabled bool
	// MigDevices counts devices by profile name.
	MigDevices map[string]int
}

// GPU is what a spec matches on.
type GPU struct {
	Index       int
	PCIDeviceID uint32
}

// Target is the geometry one GPU should have.
type Target struct {
	Enabled bool
	Devices map[string]int
}

//go:embed default.yaml
var defaultYAML []byte

// Default is the built-in config.
func Default() *Config {
	c, err := Parse(defaultYAML)
	if err != nil {
		panic("migparted: built-in config: " + err.Error()) // a test parses it
	}
	return c
}

type rawSpec struct {
	DeviceFilter json.RawMessage `json:"device-filter"`
	Devices      json.RawMessage `json:"devices"`
	MigEnabled   *bool           `json:"mig-enabled"`
	MigDevices   map[string]int  `json:"mig-devices"`
}

// Parse decodes a config strictly.
func Parse(data []byte) (*Config, error) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("mig-parted config: %v", err)
	}
	var raw struct {
		Version    string               `json:"version"`
		MigConfigs map[string][]rawSpec `json:"mig-configs"`
	}
	dec := json.NewDecoder(strings.NewReader(string(js)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("mig-parted config: %v", strings.TrimPrefix(err.Error(), "json: "))
	}
	if raw.Version != "v1" {
		return nil, fmt.Errorf("mig-parted config: version: %q, want v1", raw.Version)
	}
	if len(raw.MigConfigs) == 0 {
		return nil, errors.New("mig-parted config: mig-configs: no configs")
	}
	c := &Config{Version: raw.Version, MigConfigs: map[string][]Spec{}}
	var errs []error
	for name, specs := range raw.MigConfigs {
		for i, rs := range specs {
			path := fmt.Sprintf("mig-configs.%s[%d]", name, i)
			s, err := parseSpec(path, rs)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			c.MigConfigs[name] = append(c.MigConfigs[name], s)
		}
	}
	return c, errors.Join(errs...)
}

func parseSpec(path string, rs rawSpec) (Spec, error) {
	var s Spec
	var errs []error
	if rs.MigEnabled == nil {
		errs = append(errs, fmt.Errorf("%s.mig-enabled: required", path))
	} else {
		s.MigEnabled = *rs.MigEnabled
	}
	var filters []string
	if len(rs.DeviceFilter) > 0 {
		var one string
		if json.Unmarshal(rs.DeviceFilter, &one) == nil {
			filters = []string{one}
		} else if err := json.Unmarshal(rs.DeviceFilter, &filters); err != nil {
			errs = append(errs, fmt.Errorf("%s.device-filter: a PCI device id or a list of them", path))
		}
	}
	for _, f := range filters {
		v, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(f), "0x"), 16, 32)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.device-filter: %q is not a PCI device id like 0x20B010DE", path, f))
			continue
		}
		s.DeviceFilter = append(s.DeviceFilter, uint32(v))
	}
	var all string
	switch {
	case len(rs.Devices) == 0:
		errs = append(errs, fmt.Errorf("%s.devices: required (all, or a list of GPU indices)", path))
	case json.Unmarshal(rs.Devices, &all) == nil:
		if all != "all" {
			errs = append(errs, fmt.Errorf("%s.devices: %q, want all or a list of GPU indices", path, all))
		}
	default:
		if err := json.Unmarshal(rs.Devices, &s.Devices); err != nil {
			errs = append(errs, fmt.Errorf("%s.devices: want all or a list of GPU indices", path))
		}
	}
	for p, n := range rs.MigDevices {
		if n < 0 {
			errs = append(errs, fmt.Errorf("%s.mig-devices[%q]: %d is negative", path, p, n))
		}
	}
	if !s.MigEnabled && len(rs.MigDevices) > 0 {
		errs = append(errs, fmt.Errorf("%s.mig-devices: set with mig-enabled: false", path))
	}
	s.MigDevices = rs.MigDevices
	return s, errors.Join(errs...)
}

// Names lists the config's names, sorted.
func (c *Config) Names() []string {
	var out []string
	for n := range c.MigConfigs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Geometry is what config name asks of each GPU, as mig-parted selects:
// the first entry whose device-filter and devices match a GPU applies to
// it; a GPU no entry matches is left out (left as it is).
func (c *Config) Geometry(name string, gpus []GPU) (map[int]Target, error) {
	specs, ok := c.MigConfigs[name]
	if !ok {
		return nil, fmt.Errorf("MIG config %q not found in the mig-parted config (it has %s)", name, strings.Join(c.Names(), ", "))
	}
	out := map[int]Target{}
	for _, g := range gpus {
		for _, s := range specs {
			if !s.matches(g) {
				continue
			}
			out[g.Index] = Target{Enabled: s.MigEnabled, Devices: s.MigDevices}
			break
		}
	}
	return out, nil
}

func (s Spec) matches(g GPU) bool {
	if len(s.DeviceFilter) > 0 {
		found := false
		for _, f := range s.DeviceFilter {
			found = found || f == g.PCIDeviceID
		}
		if !found {
			return false
		}
	}
	if s.Devices == nil {
		return true
	}
	for _, i := range s.Devices {
		if i == g.Index {
			return true
		}
	}
	return false
}
