package api

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
	yaml3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	sjson "sigs.k8s.io/json"
)

// notSupported lists well-known Kubernetes fields that skiff does not
// implement, by the Go type that would hold them. They are rejected as
// "field not supported by skiff"; any other unknown field is "unknown field"
// (usually a typo). Constant table: never modified.
var notSupported = map[string][]string{
	"ObjectMeta": {"selfLink"},
	"PodSpec": {"imagePullSecrets",
		"hostPID", "hostIPC", "hostUsers", "shareProcessNamespace", "hostAliases", "runtimeClassName",
		"topologySpreadConstraints", "overhead", "readinessGates", "os",
		"schedulingGates", "setHostnameAsFQDN", "resources", "hostnameOverride"},
	"Container": {"lifecycle", "resizePolicy", "restartPolicy", "restartPolicyRules",
		"stdinOnce", "volumeDevices"},
	"ContainerPort": {"hostIP"},
	// No process namespace sharing in skiff (hostPID and
	// shareProcessNamespace are refused too): kubectl debug without --target.
	"EphemeralContainer": {"targetContainerName"},
	// securityContext (security.go): SELinux, AppArmor and Windows.
	"PodSecurityContext": {"seLinuxOptions", "windowsOptions", "appArmorProfile", "seLinuxChangePolicy"},
	"SecurityContext":    {"seLinuxOptions", "windowsOptions", "appArmorProfile"},
	"VolumeMount":        {"mountPropagation", "subPathExpr", "recursiveReadOnly"},
	"Probe":              {"grpc"},
	"Affinity":           {"podAffinity", "podAntiAffinity"},
	"Volume": {"nfs", "awsElasticBlockStore", "gcePersistentDisk", "azureDisk", "azureFile",
		"csi", "downwardAPI", "ephemeral", "iscsi", "rbd", "cephfs", "cinder", "fc", "flexVolume",
		"flocker", "gitRepo", "glusterfs", "photonPersistentDisk", "portworxVolume", "quobyte", "scaleIO",
		"storageos", "vsphereVolume", "image"},
	"ServiceSpec": {"externalIPs", "loadBalancerIP", "loadBalancerSourceRanges", "externalName",
		"healthCheckNodePort", "publishNotReadyAddresses", "sessionAffinityConfig", "ipFamilies", "ipFamilyPolicy",
		"allocateLoadBalancerNodePorts", "loadBalancerClass", "internalTrafficPolicy", "trafficDistribution"},
	"ServicePort":       {"appProtocol"},
	"EndpointPort":      {"appProtocol"},
	"NodeSpec":          {"configSource", "externalID"},
	"EnvVarSource":      {"fileKeyRef"},
	"Event":             {"series", "action", "related"},
	"LeaseSpec":         {"strategy", "preferredHolder"},
	"Endpoint":          {"hostname", "zone", "hints", "deprecatedTopology"},
	"EndpointSlicePort": {"appProtocol"},
	// Storage (storage.go): volume sources beyond hostPath and local,
	// mount options, raw block devices' data sources and volume attribute
	// classes, expansion bookkeeping.
	"PersistentVolumeSpec": {"awsElasticBlockStore", "gcePersistentDisk", "azureDisk", "azureFile", "csi", "nfs",
		"iscsi", "rbd", "cephfs", "cinder", "fc", "flexVolume", "flocker", "glusterfs", "photonPersistentDisk",
		"portworxVolume", "quobyte", "scaleIO", "storageos", "vsphereVolume", "mountOptions", "volumeAttributesClassName"},
	"LocalVolumeSource":           {"fsType"},
	"PersistentVolumeClaimSpec":   {"dataSource", "dataSourceRef", "volumeAttributesClassName"},
	"PersistentVolumeClaimStatus": {"allocatedResources", "allocatedResourceStatuses", "currentVolumeAttributesClassName", "modifyVolumeStatus"},
	"StorageClass":                {"mountOptions"},
	// ServiceAccount: legacy token Secrets and image pull credentials
	// (skiff pulls without credentials); projected sources beyond the
	// API access volume's three.
	"ServiceAccount":        {"secrets", "imagePullSecrets"},
	"VolumeProjection":      {"secret", "clusterTrustBundle", "podCertificate"},
	"DownwardAPIVolumeFile": {"resourceFieldRef"},
	// Job: success policies and external controllers (MultiKueue's managedBy).
	"JobSpec": {"successPolicy", "managedBy"},
	// Kueue (kueue.go): fair sharing, admission checks, MultiKueue, flavor
	// fungibility, partial admission's bookkeeping and TAS beyond one
	// domain per pod set.
	"ClusterQueueSpec":      {"flavorFungibility", "admissionChecks", "admissionChecksStrategy", "fairSharing", "admissionScope", "concurrentAdmissionPolicy"},
	"ClusterQueueStatus":    {"fairSharing"},
	"LocalQueueSpec":        {"fairSharing"},
	"LocalQueueStatus":      {"fairSharing", "flavors"},
	"WorkloadSpec":          {"maximumExecutionTimeSeconds", "preemptionGates"},
	"WorkloadStatus":        {"reclaimablePods", "admissionChecks", "resourceRequests", "accumulatedPastExecutionTimeSeconds", "schedulingStats", "nominatedClusterNames", "clusterName", "unhealthyNodes", "preemptionGates"},
	"PodSetTopologyRequest": {"unconstrained", "podIndexLabel", "subGroupIndexLabel", "subGroupCount", "podSetGroupName", "podSetSliceRequiredTopology", "podSetSliceSize", "podsetSliceRequiredTopologyConstraints"},
	"PodSetAssignment":      {"delayedTopologyRequest"},
	// DRA (resource.go): per-device node selection, binding conditions,
	// consumable capacity, admin access, extended resources backed by a
	// class, list attributes and the drivers' device status are beyond
	// skiff.
	"ResourceSliceSpec": {"perDeviceNodeSelection"},
	"Device": {"nodeName", "nodeSelector", "allNodes", "bindsToNode", "bindingConditions",
		"bindingFailureConditions", "allowMultipleAllocations", "nodeAllocatableResourceMappings"},
	"DeviceAttribute":               {"ints", "bools", "strings", "versions"},
	"DeviceCapacity":                {"requestPolicy"},
	"DeviceClassSpec":               {"extendedResourceName"},
	"ExactDeviceRequest":            {"adminAccess", "capacity"},
	"DeviceSubRequest":              {"capacity"},
	"ResourceClaimStatus":           {"devices"},
	"DeviceRequestAllocationResult": {"adminAccess", "bindingConditions", "bindingFailureConditions", "shareID", "consumedCapacity"},
}

// isNotSupported reports whether field is a Kubernetes field of the type
// named typeName that skiff lacks.
func isNotSupported(typeName, field string) bool {
	for _, f := range notSupported[typeName] {
		if f == field {
			return true
		}
	}
	return false
}

var (
	quantityType    = reflect.TypeFor[Quantity]()
	intOrStringType = reflect.TypeFor[IntOrString]()
	timeType        = reflect.TypeFor[Time]()
	microTimeType   = reflect.TypeFor[MicroTime]()
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

// checkStrict walks the generic JSON value v (from parseJSON, numbers as
// json.Number) against Go type t and returns every unknown field and every
// value of the wrong type, with its path.
func checkStrict(v any, t reflect.Type) FieldErrors {
	w := &strictWalker{}
	w.walk("", v, t)
	return w.errs
}

type strictWalker struct {
	errs FieldErrors
}

// structFieldTables caches structFields' tables, one per struct type, for
// the life of the process (types do not change; a table is read only once
// stored). Building one per request was a sixth of a create's allocations.
var structFieldTables sync.Map // reflect.Type → map[string]reflect.Type

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func (w *strictWalker) wrongType(path string, v any, want string) {
	got := jsonTypeName(v)
	detail := fmt.Sprintf("expected %s, got %s", want, got)
	if want == "string" && (got == "number" || got == "boolean") {
		detail += " (quote it in YAML)"
	}
	w.errs = append(w.errs, Invalid(path, shortValue(v), detail))
}

func (w *strictWalker) walk(path string, v any, t reflect.Type) {
	if v == nil {
		return // null is the zero value, as in Kubernetes
	}
	if w.walkSpecial(path, v, t) {
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		w.walk(path, v, t.Elem())
	case reflect.Interface:
		return
	case reflect.Struct:
		w.walkStruct(path, v, t)
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			w.wrongType(path, v, "object")
			return
		}
		for _, key := range sortedKeys(m) {
			w.walk(path+"["+key+"]", m[key], t.Elem())
		}
	case reflect.Slice:
		w.walkSlice(path, v, t)
	default:
		w.walkScalar(path, v, t)
	}
}

// walkSpecial checks the types with a JSON form of their own (quantities,
// int-or-string, times, any json.Unmarshaler); false for the others.
func (w *strictWalker) walkSpecial(path string, v any, t reflect.Type) bool {
	switch t {
	case rawMessageType:
		return true
	case quantityType:
		var s string
		switch x := v.(type) {
		case string:
			s = x
		case json.Number:
			s = x.String()
		default:
			w.wrongType(path, v, "quantity (e.g. \"500m\", \"64Mi\", 1)")
			return true
		}
		if _, err := resource.ParseQuantity(s); err != nil {
			w.errs = append(w.errs, Invalid(path, s, err.Error()))
		}
		return true
	case intOrStringType:
		switch x := v.(type) {
		case string:
		case json.Number:
			if _, err := strconv.ParseInt(x.String(), 10, 32); err != nil {
				w.errs = append(w.errs, Invalid(path, x, "expected a 32-bit integer or a string"))
			}
		default:
			w.wrongType(path, v, "integer or string")
		}
		return true
	case timeType, microTimeType:
		s, ok := v.(string)
		if !ok {
			w.wrongType(path, v, "RFC 3339 time string")
			return true
		}
		if s != "" {
			if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
				w.errs = append(w.errs, Invalid(path, s, "expected an RFC 3339 time, e.g. \"2025-01-02T15:04:05Z\""))
			}
		}
		return true
	}
	if t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(unmarshalerType) {
		// A type with its own JSON form: let it judge.
		b, _ := json.Marshal(v)
		if err := json.Unmarshal(b, reflect.New(t).Interface()); err != nil {
			w.errs = append(w.errs, Invalid(path, shortValue(v), err.Error()))
		}
		return true
	}
	return false
}

// walkStruct checks an object against struct t: every key a field (an
// unknown one named, with a suggestion), every value of its field's type.
func (w *strictWalker) walkStruct(path string, v any, t reflect.Type) {
	m, ok := v.(map[string]any)
	if !ok {
		w.wrongType(path, v, "object")
		return
	}
	table := w.structFields(t)
	for _, key := range sortedKeys(m) {
		ft, ok := table[key]
		if !ok {
			fp := joinPath(path, key)
			if isNotSupported(t.Name(), key) {
				w.errs = append(w.errs, Unknown(fp, ""))
			} else {
				w.errs = append(w.errs, UnknownField(fp, suggest(key, table)))
			}
			continue
		}
		w.walk(joinPath(path, key), m[key], ft)
	}
}

// walkSlice checks a list (or, for []byte, base64 data).
func (w *strictWalker) walkSlice(path string, v any, t reflect.Type) {
	if t.Elem().Kind() == reflect.Uint8 {
		s, ok := v.(string)
		if !ok {
			w.wrongType(path, v, "base64 string")
			return
		}
		if _, err := base64.StdEncoding.DecodeString(s); err != nil {
			w.errs = append(w.errs, Invalid(path, "<bytes>", "expected base64 data (put plain text in stringData)"))
		}
		return
	}
	a, ok := v.([]any)
	if !ok {
		w.wrongType(path, v, "list")
		return
	}
	for i, e := range a {
		w.walk(elemPath(path, "", i), e, t.Elem())
	}
}

// walkScalar checks a string, boolean or number against its Go kind (and
// an integer's range).
func (w *strictWalker) walkScalar(path string, v any, t reflect.Type) {
	switch t.Kind() {
	case reflect.String:
		if _, ok := v.(string); !ok {
			w.wrongType(path, v, "string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			w.wrongType(path, v, "boolean")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			w.wrongType(path, v, "integer")
			return
		}
		if _, err := strconv.ParseInt(n.String(), 10, t.Bits()); err != nil {
			w.errs = append(w.errs, Invalid(path, n, fmt.Sprintf("expected a %d-bit integer", t.Bits())))
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(json.Number)
		if !ok {
			w.wrongType(path, v, "integer")
			return
		}
		if _, err := strconv.ParseUint(n.String(), 10, t.Bits()); err != nil {
			w.errs = append(w.errs, Invalid(path, n, fmt.Sprintf("expected a non-negative %d-bit integer", t.Bits())))
		}
	case reflect.Float32, reflect.Float64:
		if _, ok := v.(json.Number); !ok {
			w.wrongType(path, v, "number")
		}
	default:
		w.errs = append(w.errs, Invalid(path, shortValue(v), fmt.Sprintf("cannot decode into %v", t)))
	}
}

// structFields maps the json names of t's fields, with embedded inline
// structs (TypeMeta) flattened, to their types.
func (w *strictWalker) structFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := structFieldTables.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	out := map[string]reflect.Type{}
	for _, f := range jsonFields(t) {
		out[f.Name] = f.Type
	}
	f, _ := structFieldTables.LoadOrStore(t, out)
	return f.(map[string]reflect.Type)
}

// jsonField is one field of a struct as encoding/json sees it.
type jsonField struct {
	// Name is the json name.
	Name string
	// GoName is the Go field name; Owner the struct type declaring it.
	GoName string
	Owner  reflect.Type
	Type   reflect.Type
	// OmitEmpty is false for fields Kubernetes marks required.
	OmitEmpty bool
}

// Field is one field of an API struct as its JSON shows it: what `skiff
// explain` lists and the OpenAPI schemas (package api/openapi) describe.
type Field = jsonField

// Fields lists the JSON fields of struct type t in declaration order, with
// embedded inline structs (TypeMeta) flattened.
func Fields(t reflect.Type) []Field { return jsonFields(t) }

// Required reports whether the field must be set: skiff's types mark the
// fields Kubernetes requires by leaving out omitempty (structs and
// booleans have a usable zero value and are never required).
func (f jsonField) Required() bool {
	return !f.OmitEmpty && f.Type.Kind() != reflect.Struct && f.Type.Kind() != reflect.Bool
}

// jsonFields lists the json fields of struct type t in declaration order,
// flattening embedded structs that have no json name.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, jsonFields(ft)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{Name: name, GoName: f.Name, Owner: t, Type: f.Type, OmitEmpty: strings.Contains(opts, "omitempty")})
	}
	return out
}

// suggest names the field of table closest to key, when one is close.
func suggest(key string, table map[string]reflect.Type) string {
	best, bestD := "", 3
	for _, name := range sortedKeys(table) {
		if strings.EqualFold(name, key) {
			return fmt.Sprintf("did you mean %q?", name)
		}
		if d := editDistance(strings.ToLower(key), strings.ToLower(name)); d < bestD && d <= len(name)/3+1 {
			best, bestD = name, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("did you mean %q?", best)
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// jsonTypeName names the JSON type of a generic value.
func jsonTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case json.Number, float64:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "list"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// shortValue is v for an error message: scalars as they are, containers by type.
func shortValue(v any) any {
	switch x := v.(type) {
	case json.Number:
		return x // a Stringer: printed unquoted
	case string:
		if len(x) > 64 {
			return x[:64] + "..."
		}
		return x
	case bool:
		return x
	}
	return jsonTypeName(v)
}

// # Duplicate keys
//
// encoding/json and YAML-to-JSON conversion keep the last of two equal keys
// in one object; kube-apiserver's strict decoding rejects them, and so does
// skiff. JSON is decoded with sigs.k8s.io/json (the decoder kube-apiserver
// uses), which names the path of every duplicate. YAML documents go through
// sigs.k8s.io/yaml's YAMLToJSONStrict, which rejects a duplicate but names
// only its line; when it fails, yamlDuplicates reads the document again as a
// yaml.v3 node tree to name the paths.

// UnmarshalStrict decodes one JSON value into v, as kube-apiserver's strict
// field validation does: a field v has no place for and a key given twice
// are errors naming their paths (FieldErrors), and so is any data after the
// value. It is for request bodies that are not API objects (Binding, Scale,
// DeleteOptions); objects go through DecodeJSON.
func UnmarshalStrict(data []byte, v any) error {
	// One pass per check: sigs.k8s.io/json's errors do not say which
	// check they come from. Both passes store the same values in v.
	unknown, err := sjson.UnmarshalStrict(data, v, sjson.DisallowUnknownFields)
	if err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	dups, err := sjson.UnmarshalStrict(data, v, sjson.DisallowDuplicateFields)
	if err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	var errs FieldErrors
	for _, p := range strictPaths(unknown) {
		errs = append(errs, UnknownField(p, ""))
	}
	for _, p := range strictPaths(dups) {
		errs = append(errs, DuplicateField(p, ""))
	}
	return errs.orNil()
}

// unmarshalTyped decodes JSON data into o (a pointer to an API type) and
// returns every key given twice as a FieldError. Unknown fields are
// checkStrict's to report.
func unmarshalTyped(data []byte, o any) (FieldErrors, error) {
	// Most requests decode without an error and give no field twice:
	// go-json-experiment decodes those (encoding/json's semantics, names
	// matched case-sensitively, a repeated name refused) in about half
	// sigs.k8s.io/json's time. Anything else, and a type that holds an
	// interface value (whose numbers UnmarshalStrict keeps as int64), is
	// decoded by sigs.k8s.io/json, which says what is wrong in its words.
	// The results are the same (TestUnmarshalTypedIsStrict).
	// o is a new object (Kind.New: its type set, nothing else), so a
	// shallow copy of it is its state before a decode that failed.
	if v := reflect.ValueOf(o); v.Kind() == reflect.Pointer && !holdsInterface(v.Type().Elem()) {
		before := reflect.New(v.Type().Elem()).Elem()
		before.Set(v.Elem())
		if jsonv2.Unmarshal(data, o, strictOptions) == nil {
			return nil, nil
		}
		v.Elem().Set(before)
	}
	dups, err := sjson.UnmarshalStrict(data, o, sjson.DisallowDuplicateFields)
	var errs FieldErrors
	for _, p := range strictPaths(dups) {
		errs = append(errs, DuplicateField(p, ""))
	}
	return errs, err
}

// strictOptions are sigs.k8s.io/json's UnmarshalStrict for go-json-experiment:
// encoding/json's semantics, names matched case-sensitively, no name twice.
var strictOptions = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(),
	jsonv2.MatchCaseInsensitiveNames(false), jsontext.AllowDuplicateNames(false))

// cleanOptions are strictOptions that refuse a name the type does not
// have: DecodeClean's.
var cleanOptions = jsonv2.JoinOptions(strictOptions, jsonv2.RejectUnknownMembers(true))

// interfaceHolders caches holdsInterface by type.
var interfaceHolders sync.Map // reflect.Type → bool

// holdsInterface reports whether a value of t can hold an interface value
// that a decoder fills (a field of type any, a map of them), looking
// through structs, pointers, slices, arrays and maps, but not into a type
// that decodes itself (json.Unmarshaler: both decoders call it alike).
func holdsInterface(t reflect.Type) bool {
	if v, ok := interfaceHolders.Load(t); ok {
		return v.(bool)
	}
	h := holdsInterfaceWalk(t, map[reflect.Type]bool{})
	interfaceHolders.Store(t, h)
	return h
}

func holdsInterfaceWalk(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false // a recursive type: answered where it started
	}
	seen[t] = true
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || t.Implements(jsonUnmarshaler) {
		return false
	}
	switch t.Kind() {
	case reflect.Interface:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return holdsInterfaceWalk(t.Elem(), seen)
	case reflect.Map:
		return holdsInterfaceWalk(t.Key(), seen) || holdsInterfaceWalk(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); (f.IsExported() || f.Anonymous) && f.Tag.Get("json") != "-" && holdsInterfaceWalk(f.Type, seen) {
				return true
			}
		}
	}
	return false
}

// strictPaths are the field paths of sigs.k8s.io/json's strict errors.
func strictPaths(strictErrs []error) []string {
	var out []string
	for _, e := range strictErrs {
		if fe, ok := errors.AsType[sjson.FieldError](e); ok {
			out = append(out, fe.FieldPath())
		} else {
			out = append(out, e.Error()) // not produced by sigs.k8s.io/json today
		}
	}
	return out
}

// orNil is l as an error, nil when l is empty.
func (l FieldErrors) orNil() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// yamlDuplicates lists the keys given twice in one mapping of a YAML
// document, with their paths (spec.containers[0].image) and the line of the
// repeat; line 1 of data is line firstLine of the stream. It is nil when
// data does not parse (the caller then reports YAMLToJSONStrict's error).
func yamlDuplicates(data []byte, firstLine int) FieldErrors {
	var doc yaml3.Node
	if err := yaml3.Unmarshal(data, &doc); err != nil {
		return nil
	}
	var errs FieldErrors
	var walk func(n *yaml3.Node, path string)
	walk = func(n *yaml3.Node, path string) {
		switch n.Kind {
		case yaml3.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml3.SequenceNode:
			for i, c := range n.Content {
				walk(c, elemPath(path, "", i))
			}
		case yaml3.MappingNode:
			seen := make(map[string]bool, len(n.Content)/2)
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if k.Kind != yaml3.ScalarNode || k.ShortTag() == "!!merge" {
					continue // complex keys and "<<" merges: YAMLToJSONStrict judges those
				}
				p := joinPath(path, k.Value)
				if seen[k.Value] {
					errs = append(errs, DuplicateField(p, fmt.Sprintf("again at line %d", k.Line+firstLine-1)))
					continue
				}
				seen[k.Value] = true
				walk(v, p)
			}
		}
	}
	walk(&doc, "")
	return errs
}
