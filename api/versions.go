package api

import (
	"encoding/json"
	"fmt"
)

// # More than one served version
//
// A kind is stored at one version (Kind.Version, the Go type's shape) and
// may be served at others too, as Kubernetes serves a deprecated version
// beside its successor (kueue.x-k8s.io v1beta1 beside v1beta2,
// resource.k8s.io v1beta1 beside v1). Each other version is a
// ServedVersion in Kind.Served with a conversion hook each way. The
// conversions work on the object's JSON tree (map[string]any, numbers as
// json.Number), not on a second Go type: the versions the course meets
// differ by renamed or regrouped fields, and a tree walk says that in a
// few lines per kind without a second copy of every struct.
//
// Where conversion happens (the one path for every kind):
//   - decoding: DecodeJSON, DecodeStream and DecodeAny accept an object at a
//     served version and convert it to the stored one before the strict
//     check, so `skiff apply -f` of a v1beta1 file stores the v1beta2 object
//     and a field neither version has is refused as usual, by its stored
//     path;
//   - the API server: a request to /apis/GROUP/OTHERVERSION/... has its
//     body converted to the stored version (ConvertToStored) and every
//     answer (object, list, table, watch event) converted back
//     (ConvertFromStored), with the version's Warning as a Warning header.
//
// Storage, controllers, the scheduler and the CLI only ever see the stored
// version.

// ServedVersion is a version a kind is served at besides its stored
// Version.
// +k8s:deepcopy-gen=false
type ServedVersion struct {
	// Version, e.g. "v1beta1".
	Version string
	// Warning, when set, is sent with every answer at this version as a
	// Warning header (Kubernetes' deprecation warning for a version:
	// "This version is deprecated. Use v1beta2 instead.").
	Warning string
	// ToStored converts obj, an object of this version as a JSON tree, to
	// the stored version in place. It is also called on partial objects
	// (a merge patch, an apply configuration): it converts what is present
	// and adds nothing. apiVersion is rewritten by the caller.
	ToStored func(obj map[string]any) error
	// FromStored converts obj, an object of the stored version, to this
	// version in place, under the same rules.
	FromStored func(obj map[string]any) error
}

// ServedAt returns the served version v of k: nil and true for the stored
// version, the other version and true for one of k.Served, false when k is
// not served at v.
func (k *Kind) ServedAt(v string) (*ServedVersion, bool) {
	if v == k.Version {
		return nil, true
	}
	for i := range k.Served {
		if k.Served[i].Version == v {
			return &k.Served[i], true
		}
	}
	return nil, false
}

// APIVersionOf is the apiVersion of k at served version sv (nil: stored).
func (k *Kind) APIVersionOf(sv *ServedVersion) string {
	if sv == nil {
		return k.APIVersion()
	}
	if k.Group == "" {
		return sv.Version
	}
	return k.Group + "/" + sv.Version
}

// servedByAPIVersion finds the served version of k named by apiVersion.
func (k *Kind) servedByAPIVersion(apiVersion string) (*ServedVersion, bool) {
	for i := range k.Served {
		if k.APIVersionOf(&k.Served[i]) == apiVersion {
			return &k.Served[i], true
		}
	}
	return nil, false
}

// ServedAtAPIVersion is ServedAt by an object's apiVersion ("group/v1beta1"):
// nil and true for the stored version, the served version and true for one
// of k.Served, false otherwise. For code that holds an object's JSON tree
// at the version its file was written in (`skiff apply`'s last-applied
// annotation and the fields the file wrote).
func (k *Kind) ServedAtAPIVersion(apiVersion string) (*ServedVersion, bool) {
	if apiVersion == k.APIVersion() {
		return nil, true
	}
	return k.servedByAPIVersion(apiVersion)
}

func (k *Kind) servesAPIVersion(apiVersion string) bool {
	_, ok := k.servedByAPIVersion(apiVersion)
	return ok
}

// ConvertTreeToStored converts m, an object of k at sv (or a part of one),
// to the stored version in place; an apiVersion naming sv becomes the
// stored one.
func (k *Kind) ConvertTreeToStored(sv *ServedVersion, m map[string]any) error {
	if sv == nil {
		return nil
	}
	if sv.ToStored != nil {
		if err := sv.ToStored(m); err != nil {
			return fmt.Errorf("convert %s %s to %s: %w", k.APIVersionOf(sv), k.Kind, k.APIVersion(), err)
		}
	}
	if av, ok := m["apiVersion"].(string); ok && av == k.APIVersionOf(sv) {
		m["apiVersion"] = k.APIVersion()
	}
	return nil
}

// ConvertTreeFromStored converts m, an object of k at the stored version,
// to sv in place, apiVersion included.
func (k *Kind) ConvertTreeFromStored(sv *ServedVersion, m map[string]any) error {
	if sv == nil {
		return nil
	}
	if sv.FromStored != nil {
		if err := sv.FromStored(m); err != nil {
			return fmt.Errorf("convert %s %s to %s: %w", k.APIVersion(), k.Kind, k.APIVersionOf(sv), err)
		}
	}
	if av, ok := m["apiVersion"].(string); ok && av == k.APIVersion() {
		m["apiVersion"] = k.APIVersionOf(sv)
	}
	return nil
}

// ConvertToStored converts the JSON object data of k at sv to the stored
// version. data that is not a JSON object is returned unchanged (the
// decoder reports it).
func (k *Kind) ConvertToStored(sv *ServedVersion, data []byte) ([]byte, error) {
	return convertJSON(data, func(m map[string]any) error { return k.ConvertTreeToStored(sv, m) })
}

// ConvertFromStored converts the JSON object data of k at the stored
// version to sv.
func (k *Kind) ConvertFromStored(sv *ServedVersion, data []byte) ([]byte, error) {
	return convertJSON(data, func(m map[string]any) error { return k.ConvertTreeFromStored(sv, m) })
}

func convertJSON(data []byte, conv func(map[string]any) error) ([]byte, error) {
	v, err := parseJSON(data)
	if err != nil {
		return data, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return data, nil
	}
	if err := conv(m); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// toStoredTree converts a decoded object m whose apiVersion names a served
// version of k to the stored version, returning the JSON to decode. Objects
// at the stored version are returned as they are.
func toStoredTree(k *Kind, m map[string]any, data []byte) ([]byte, error) {
	av, _ := m["apiVersion"].(string)
	sv, ok := k.servedByAPIVersion(av)
	if !ok {
		return data, nil
	}
	if err := k.ConvertTreeToStored(sv, m); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// RenameField moves m[from] to m[to] when present: the conversion of a
// renamed field (v1beta1 spec.cohort is v1beta2 spec.cohortName).
func RenameField(m map[string]any, from, to string) {
	if v, ok := m[from]; ok {
		delete(m, from)
		m[to] = v
	}
}

// SubTree returns the object at path in m (nil when a step is missing or not
// an object), for conversions that reach into spec or status.
func SubTree(m map[string]any, path ...string) map[string]any {
	for _, p := range path {
		next, ok := m[p].(map[string]any)
		if !ok {
			return nil
		}
		m = next
	}
	return m
}
