package api

import (
	"encoding/json"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/endpoints/deprecation"
	drav1beta1 "k8s.io/dynamic-resource-allocation/api/v1beta1"
	drav1beta2 "k8s.io/dynamic-resource-allocation/api/v1beta2"
	sjson "sigs.k8s.io/json"
)

// resource.k8s.io v1beta1 and v1beta2, served beside v1 (versions.go).
//
// The conversions are Kubernetes' own: the object goes through the
// k8s.io/api/resource types of its version, is converted by the generated
// and hand-written functions of k8s.io/dynamic-resource-allocation/api
// (v1beta1's request fields move under `exactly`, v1beta1's
// devices[].basic is flattened, ...) into k8s.io/api/resource/v1, and comes
// back as JSON for skiff's strict decoder. metadata is carried over as it
// is. Fields the typed conversion adds empty (null, "", {}) are dropped, so
// a partial object (a merge patch) stays partial; a v1beta1 merge patch
// that sets a field to "" therefore leaves it unchanged.

// resourceScheme holds the three versions' types and the conversions.
var resourceScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{resourcev1.AddToScheme, drav1beta1.AddToScheme, drav1beta2.AddToScheme} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("resource.k8s.io scheme: %v", err))
		}
	}
	return s
}()

// newResourceVersioned returns an empty k8s.io/api object of kind at
// version (v1, v1beta1, v1beta2) with its apiVersion and kind set.
func newResourceVersioned(version, kind string) (runtime.Object, error) {
	gvk := resourcev1.SchemeGroupVersion.WithKind(kind)
	gvk.Version = version
	o, err := resourceScheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("no %s/%s %s: %w", ResourceGroup, version, kind, err)
	}
	o.GetObjectKind().SetGroupVersionKind(gvk)
	return o, nil
}

// convertResourceTree converts m, an object (or part of one) of kind at
// version from, to version to in place, through Kubernetes' conversions.
func convertResourceTree(kind, from, to string, m map[string]any) error {
	in, err := newResourceVersioned(from, kind)
	if err != nil {
		return err
	}
	out, err := newResourceVersioned(to, kind)
	if err != nil {
		return err
	}
	meta, hasMeta := m["metadata"]
	body := make(map[string]any, len(m))
	for k, v := range m {
		if k != "metadata" && k != "apiVersion" && k != "kind" {
			body[k] = v
		}
	}
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	strictErrs, err := sjson.UnmarshalStrict(data, in)
	if err != nil {
		return err
	}
	if len(strictErrs) > 0 {
		return strictErrs[0]
	}
	if err := resourceScheme.Convert(in, out, nil); err != nil {
		return err
	}
	converted, err := json.Marshal(out)
	if err != nil {
		return err
	}
	parsed, err := parseJSON(converted)
	if err != nil {
		return err
	}
	tree, _ := parsed.(map[string]any)
	for k := range m {
		if k != "apiVersion" && k != "kind" {
			delete(m, k)
		}
	}
	for k, v := range tree {
		if k == "metadata" || k == "apiVersion" || k == "kind" {
			continue
		}
		if v = pruneEmpty(v); v != nil {
			m[k] = v
		}
	}
	if hasMeta {
		m["metadata"] = meta
	}
	return nil
}

// pruneEmpty drops null, "" and {} from a JSON tree (nil when v itself is
// empty); lists keep their length.
func pruneEmpty(v any) any {
	switch t := v.(type) {
	case nil:
		return nil
	case string:
		if t == "" {
			return nil
		}
	case map[string]any:
		for k, e := range t {
			if e = pruneEmpty(e); e == nil {
				delete(t, k)
			} else {
				t[k] = e
			}
		}
		if len(t) == 0 {
			return nil
		}
	case []any:
		for i, e := range t {
			if p := pruneEmpty(e); p != nil {
				t[i] = p
			} else if _, isMap := e.(map[string]any); isMap {
				t[i] = map[string]any{}
			}
		}
	}
	return v
}

// resourceOlderVersions are the versions of resource.k8s.io served beside
// v1, with Kubernetes' deprecation warnings.
var resourceOlderVersions = []string{"v1beta1", "v1beta2"}

// resourceServed builds kind's ServedVersions for Kinds.
func resourceServed(kind string) []ServedVersion {
	var out []ServedVersion
	for _, v := range resourceOlderVersions {
		warning := ""
		if o, err := newResourceVersioned(v, kind); err == nil {
			warning = deprecation.WarningMessage(o)
		}
		out = append(out, ServedVersion{
			Version:    v,
			Warning:    warning,
			ToStored:   func(m map[string]any) error { return convertResourceTree(kind, v, "v1", m) },
			FromStored: func(m map[string]any) error { return convertResourceTree(kind, "v1", v, m) },
		})
	}
	return out
}

// ToKubernetesResource converts a skiff DRA object (DeviceClass,
// ResourceClaim, ResourceClaimTemplate, ResourceSlice) to its
// k8s.io/api/resource/v1 type (same JSON), for the Kubernetes libraries
// that work on those: the DRA CEL environment and the structured allocator.
func ToKubernetesResource[T any](o Object) (*T, error) {
	data, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	out := new(T)
	if err := json.Unmarshal(data, out); err != nil {
		return nil, fmt.Errorf("convert %s to k8s.io/api: %w", o.GetObjectMeta().Name, err)
	}
	return out, nil
}
