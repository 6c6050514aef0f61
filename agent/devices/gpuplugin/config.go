package gpuplugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/api"
)

// PluginConfig is NVIDIA's device plugin config file (api/config/v1 of
// NVIDIA/k8s-device-plugin), as the GPU operator and the plugin's Helm
// chart keep it in a ConfigMap, one key per config:
//
//	version: v1
//	flags:
//	  migStrategy: none          # none | single | mixed
//	sharing:
//	  timeSlicing:               # or mps: (not both)
//	    renameByDefault: false   # true: advertise <name>.shared
//	    failRequestsGreaterThanOne: false
//	    resources:
//	    - name: nvidia.com/gpu
//	      replicas: 4            # >= 2
//
// ParseConfig decodes it strictly, with the plugin's own words for what
// the plugin refuses; what the plugin would accept and ignore with a
// warning (a non-default rename, a devices list) skiff refuses with those
// warnings' words, and any other field skiff does not implement is refused
// naming its path.
type PluginConfig struct {
	Version string
	// MigStrategy is flags.migStrategy: none (default), single or mixed.
	MigStrategy string
	// AllocationPolicy is flags.plugin.sharedDevicesAllocationPolicy:
	// distributed (default: replicas of the least-used GPUs first) or
	// packed (of the most-used).
	AllocationPolicy string
	// TimeSlicing and MPS are sharing.timeSlicing and sharing.mps; at most
	// one is set.
	TimeSlicing *Replicated
	MPS         *Replicated
	// HAMi: the node hands out HAMi's vGPU slices instead (HAMi's device
	// plugin, on nodes labelled gpu=on): nvidia.com/gpu is every GPU
	// not filtered × HAMiSettings.SplitCount, and what a container gets
	// is the scheduler's decision on its pod
	// (hami.io/vgpu-devices-to-allocate). Not part of NVIDIA's config
	// file: HAMiConfig makes it, from HAMi's device config.
	HAMi         bool
	HAMiSettings api.HAMiNodeSettings
}

// HAMiConfig is the config of a node that runs HAMi's device plugin.
func HAMiConfig(s api.HAMiNodeSettings) *PluginConfig {
	c := DefaultConfig()
	c.HAMi, c.HAMiSettings = true, s
	return c
}

// Replicated is sharing.timeSlicing or sharing.mps.
type Replicated struct {
	RenameByDefault bool
	// FailRequestsGreaterThanOne: a container asking more than one
	// replica fails at admission. Default false for time-slicing, true
	// for MPS (as the plugin defaults it).
	FailRequestsGreaterThanOne bool
	Resources                  []ReplicatedResource
}

// ReplicatedResource is one entry of resources.
type ReplicatedResource struct {
	// Name is the resource shared (nvidia.com/gpu, nvidia.com/mig-1g.5gb).
	Name string
	// Rename is what it is advertised as: "" (Name), or Name.shared.
	Rename   string
	Replicas int
}

// The plugin's defaults and the names of its strategies.
const (
	MigStrategyNone   = "none"
	MigStrategySingle = "single"
	MigStrategyMixed  = "mixed"

	AllocationDistributed = "distributed"
	AllocationPacked      = "packed"

	// SharedSuffix is what renameByDefault appends.
	SharedSuffix = ".shared"
)

// DefaultConfig is no config at all: whole GPUs, MIG strategy none.
func DefaultConfig() *PluginConfig {
	return &PluginConfig{Version: "v1", MigStrategy: MigStrategyNone, AllocationPolicy: AllocationDistributed}
}

// Sharing is the active sharing strategy, in GFD's words (none,
// time-slicing, mps).
func (c *PluginConfig) Sharing() gpu.Sharing {
	switch {
	case c == nil:
		return gpu.SharingNone
	case c.MPS != nil:
		return gpu.SharingMPS
	case c.TimeSlicing != nil:
		return gpu.SharingTimeSlicing
	}
	return gpu.SharingNone
}

// Replicated returns the active sharing section (nil without sharing).
func (c *PluginConfig) Replicated() *Replicated {
	if c == nil {
		return nil
	}
	if c.MPS != nil {
		return c.MPS
	}
	return c.TimeSlicing
}

// ReplicasOf returns the replicas and the advertised name of resource
// under the config (1 and resource itself when it is not shared).
func (c *PluginConfig) ReplicasOf(resource string) (int, string) {
	if r := c.Replicated(); r != nil {
		for _, rr := range r.Resources {
			if rr.Name == resource {
				name := rr.Name
				if rr.Rename != "" {
					name = rr.Rename
				}
				return rr.Replicas, name
			}
		}
	}
	return 1, resource
}

// obj is one decoded YAML mapping with its path, for strict decoding.
type obj struct {
	path   string
	fields map[string]json.RawMessage
	errs   *[]error
}

func (o obj) bad(field, format string, args ...any) {
	*o.errs = append(*o.errs, fmt.Errorf("%s: %s", join(o.path, field), fmt.Sprintf(format, args...)))
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// only refuses every field not in allowed, naming its path.
func (o obj) only(allowed ...string) {
	var keys []string
	for k := range o.fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(allowed, k) {
			o.bad(k, "field not supported by skiff's built-in device plugin")
		}
	}
}

func decodeObj(path string, raw json.RawMessage, errs *[]error) (obj, bool) {
	o := obj{path: path, errs: errs}
	if err := json.Unmarshal(raw, &o.fields); err != nil || o.fields == nil {
		*errs = append(*errs, fmt.Errorf("%s: must be a mapping", orTop(path)))
		return o, false
	}
	return o, true
}

func orTop(path string) string {
	if path == "" {
		return "config"
	}
	return path
}

// get decodes field into v when present; false when absent or wrong.
func (o obj) get(field string, v any) bool {
	raw, ok := o.fields[field]
	if !ok {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		o.bad(field, "%s", strings.TrimPrefix(err.Error(), "json: "))
		return false
	}
	return true
}

// ParseConfig reads one config (the value of one ConfigMap key). Every
// problem is reported at once.
func ParseConfig(data []byte) (*PluginConfig, error) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("unmarshal error: %v", err)
	}
	var errs []error
	top, ok := decodeObj("", js, &errs)
	if !ok {
		return nil, errors.Join(errs...)
	}
	c := DefaultConfig()
	c.Version = ""
	top.get("version", &c.Version)
	if c.Version == "" {
		c.Version = "v1"
	}
	if c.Version != "v1" {
		return nil, fmt.Errorf("unknown version: %v", c.Version)
	}
	for _, f := range []string{"resources", "imex"} {
		if _, ok := top.fields[f]; ok {
			top.bad(f, "Customizing the '%s' field is not yet supported in the config", f)
		}
	}
	top.only("version", "flags", "sharing", "resources", "imex")
	if raw, ok := top.fields["flags"]; ok {
		parseFlags(c, raw, &errs)
	}
	if raw, ok := top.fields["sharing"]; ok {
		parseSharing(c, raw, &errs)
	}
	if c.Sharing() == gpu.SharingMPS && c.MigStrategy == MigStrategyMixed {
		errs = append(errs, errors.New("using --mig-strategy=mixed is not supported with MPS"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// parseFlags reads flags: what skiff's plugin does, with the values it
// implements.
func parseFlags(c *PluginConfig, raw json.RawMessage, errs *[]error) {
	f, ok := decodeObj("flags", raw, errs)
	if !ok {
		return
	}
	f.only("migStrategy", "failOnInitError", "nvidiaDriverRoot", "plugin")
	if f.get("migStrategy", &c.MigStrategy) {
		switch c.MigStrategy {
		case MigStrategyNone, MigStrategySingle, MigStrategyMixed:
		default:
			*errs = append(*errs, fmt.Errorf("unknown MIG strategy: %v", c.MigStrategy))
		}
	}
	// failOnInitError: skiff's plugin starts only where the agent found
	// GPUs, so both values mean the same; nvidiaDriverRoot: the host's.
	var b bool
	f.get("failOnInitError", &b)
	var root string
	if f.get("nvidiaDriverRoot", &root) && root != "/" {
		f.bad("nvidiaDriverRoot", "%q: skiff's plugin uses the host's driver (\"/\")", root)
	}
	raw, ok = f.fields["plugin"]
	if !ok {
		return
	}
	p, ok := decodeObj("flags.plugin", raw, errs)
	if !ok {
		return
	}
	p.only("sharedDevicesAllocationPolicy", "deviceIDStrategy", "deviceListStrategy", "passDeviceSpecs")
	if p.get("sharedDevicesAllocationPolicy", &c.AllocationPolicy) && c.AllocationPolicy != AllocationDistributed && c.AllocationPolicy != AllocationPacked {
		*errs = append(*errs, fmt.Errorf("invalid --shared-devices-allocation-policy option: %s", c.AllocationPolicy))
	}
	var s string
	if p.get("deviceIDStrategy", &s) && s != "uuid" {
		if s == "index" {
			p.bad("deviceIDStrategy", "index is not supported by skiff's built-in device plugin (devices are advertised by UUID)")
		} else {
			*errs = append(*errs, fmt.Errorf("invalid --device-id-strategy option: %v", s))
		}
	}
	var list any
	if p.get("deviceListStrategy", &list) {
		for _, s := range strategies(list) {
			if s != "envvar" && s != "cdi-cri" {
				p.bad("deviceListStrategy", "%q is not supported by skiff's built-in device plugin (it sets NVIDIA_VISIBLE_DEVICES and CDI devices: envvar, cdi-cri)", s)
			}
		}
	}
	if p.get("passDeviceSpecs", &b) && b {
		p.bad("passDeviceSpecs", "true is not supported by skiff's built-in device plugin (device nodes come through CDI)")
	}
}

func strategies(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			s, _ := e.(string)
			out = append(out, s)
		}
		return out
	}
	return []string{fmt.Sprint(v)}
}

// parseSharing reads sharing.timeSlicing and sharing.mps.
func parseSharing(c *PluginConfig, raw json.RawMessage, errs *[]error) {
	s, ok := decodeObj("sharing", raw, errs)
	if !ok {
		return
	}
	s.only("timeSlicing", "mps")
	if raw, ok := s.fields["timeSlicing"]; ok && string(raw) != "null" {
		c.TimeSlicing = parseReplicated("sharing.timeSlicing", raw, false, errs)
	}
	if raw, ok := s.fields["mps"]; ok && string(raw) != "null" {
		c.MPS = parseReplicated("sharing.mps", raw, true, errs)
	}
	if c.TimeSlicing != nil && c.MPS != nil {
		*errs = append(*errs, errors.New("sharing: Time-slicing and MPS are mutually exclusive"))
	}
}

// parseReplicated reads one sharing section with the plugin's checks
// (api/config/v1/replicas.go) and words.
func parseReplicated(path string, raw json.RawMessage, mps bool, errs *[]error) *Replicated {
	o, ok := decodeObj(path, raw, errs)
	if !ok {
		return nil
	}
	r := &Replicated{FailRequestsGreaterThanOne: mps}
	o.only("renameByDefault", "failRequestsGreaterThanOne", "resources")
	o.get("renameByDefault", &r.RenameByDefault)
	o.get("failRequestsGreaterThanOne", &r.FailRequestsGreaterThanOne)
	var items []json.RawMessage
	if _, ok := o.fields["resources"]; !ok {
		*errs = append(*errs, fmt.Errorf("%s: no resources specified", path))
		return r
	}
	if o.get("resources", &items) && len(items) == 0 {
		*errs = append(*errs, fmt.Errorf("%s: no resources specified", path))
	}
	seen := map[string]bool{}
	for i, item := range items {
		ip := fmt.Sprintf("%s.resources[%d]", path, i)
		rr, ok := parseResource(ip, item, r.RenameByDefault, strings.TrimPrefix(path, "sharing."), errs)
		if !ok {
			continue
		}
		if seen[rr.Name] {
			*errs = append(*errs, fmt.Errorf("%s.name: %s is listed twice", ip, rr.Name))
		}
		seen[rr.Name] = true
		r.Resources = append(r.Resources, rr)
	}
	return r
}

func parseResource(path string, raw json.RawMessage, renameByDefault bool, section string, errs *[]error) (ReplicatedResource, bool) {
	o, ok := decodeObj(path, raw, errs)
	if !ok {
		return ReplicatedResource{}, false
	}
	o.only("name", "rename", "devices", "replicas")
	var rr ReplicatedResource
	if !o.get("name", &rr.Name) {
		*errs = append(*errs, fmt.Errorf("%s: no resource name specified", path))
		return rr, false
	}
	name, err := resourceName(rr.Name)
	if err != nil {
		o.bad("name", "%v", err)
		return rr, false
	}
	rr.Name = name
	var devices any
	if o.get("devices", &devices) {
		if s, isString := devices.(string); !isString || s != "all" {
			if isString {
				o.bad("devices", "devices set as '%v' but the only valid string input is 'all'", s)
			} else {
				o.bad("devices", "Customizing the 'devices' field in sharing.%s.resources is not yet supported in the config", section)
			}
		}
	}
	if _, ok := o.fields["replicas"]; !ok {
		*errs = append(*errs, fmt.Errorf("%s: no replicas specified", path))
		return rr, false
	}
	if !o.get("replicas", &rr.Replicas) {
		return rr, false
	}
	if rr.Replicas < 2 {
		*errs = append(*errs, fmt.Errorf("%s.replicas: number of replicas must be >= 2", path))
		return rr, false
	}
	if rr.Replicas > MaxReplicas {
		o.bad("replicas", "%d is more than skiff simulates (at most %d per device)", rr.Replicas, MaxReplicas)
		return rr, false
	}
	var rename string
	o.get("rename", &rename)
	if rename != "" {
		if n, err := resourceName(rename); err == nil {
			rename = n
		}
	}
	def := rr.Name + SharedSuffix
	switch {
	case renameByDefault && (rename == "" || rename == def):
		rr.Rename = def
	case rename != "":
		o.bad("rename", "Setting the 'rename' field in sharing.%s.resources is not yet supported in the config", section)
		return rr, false
	}
	return rr, true
}

// MaxReplicas bounds the replicas of one device (the devices the plugin
// lists, and the simulator's files, grow with it).
const MaxReplicas = 64

// resourceName is NewResourceName of the plugin: nvidia.com/ prefixed
// when the name has none, at most 63 characters, a DNS subdomain after it.
func resourceName(n string) (string, error) {
	if !strings.HasPrefix(n, "nvidia.com/") {
		n = "nvidia.com/" + n
	}
	if len(n) > 63 {
		return "", fmt.Errorf("fully-qualified resource name must be 63 characters or less: %v", n)
	}
	if msgs := validation.IsDNS1123Subdomain(strings.TrimPrefix(n, "nvidia.com/")); len(msgs) > 0 {
		return "", fmt.Errorf("incorrect format for resource name '%v': %v", n, msgs)
	}
	return n, nil
}
