package kubectl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/patch"
	"skiff.dev/skiff/client"
)

// Result is what Apply did to an object, in kubectl's words.
type Result string

// Apply's results.
const (
	Created    Result = "created"
	Configured Result = "configured"
	Unchanged  Result = "unchanged"
)

// FieldManagerClientSideApply names the writes of Apply in managedFields,
// as kubectl's are "kubectl-client-side-apply".
const FieldManagerClientSideApply = "skiff-client-side-apply"

// Applier is kubectl's client-side apply (kubectl apply without
// --server-side).
type Applier struct {
	Client client.Interface
	// Warnings gets kubectl's warning about an object that lacks the
	// last-applied annotation (it is patched in).
	Warnings io.Writer
}

// Apply creates obj, or patches the live object the way kubectl's
// client-side apply does, and returns Created, Configured or Unchanged.
// written is the document obj was decoded from, as parsed (WrittenFields;
// nil when unknown).
//
// The file's object is written with the annotation
// kubectl.kubernetes.io/last-applied-configuration holding its own JSON.
// The next apply computes a three-way patch (package api/patch: strategic
// merge, or JSON merge for a custom resource, as kubectl) from that
// annotation (original), the file (modified) and the live object
// (current): it sets what the file sets and deletes what the file no
// longer sets. Fields nobody wrote in the file (defaults, a Service's
// clusterIP and nodePorts, a pod's nodeName, the annotations of
// controllers and of `rollout restart`) are not in the patch, so they stay.
// An empty patch is "unchanged", and so is a patch that changes nothing
// once the server's defaults are in (kubectl says "configured" there: a
// list Kubernetes replaces whole, such as a claim's requests, differs from
// the file by its defaults). The patch is applied to the live object here
// and written with its resourceVersion; a conflict reads again.
//
// A file at an older served version (resource.k8s.io/v1beta1,
// kueue.x-k8s.io/v1beta1: api/versions.go) was decoded into the stored
// version; the three documents are compared at the stored version too,
// and the annotation keeps the file's version, as kubectl writes it.
func (a *Applier) Apply(ctx context.Context, k *api.Kind, obj api.Object, written map[string]any) (Result, error) {
	cl := a.Client
	if client.FieldManager(ctx) == "" {
		ctx = client.WithFieldManager(ctx, FieldManagerClientSideApply)
	}
	m := obj.GetObjectMeta()
	modified, err := AppliedConfiguration(k, obj, written)
	if err != nil {
		return "", err
	}
	warned := false
	for attempt := 0; ; attempt++ {
		cur, err := cl.Get(ctx, k, m.Namespace, m.Name)
		if api.IsNotFound(err) {
			created, err := api.DecodeJSON(k, modified)
			if err != nil {
				return "", fmt.Errorf("decode %s %q: %w", k.Kind, m.Name, err)
			}
			if _, err := cl.Create(ctx, created); err != nil {
				return "", err
			}
			return Created, nil
		}
		if err != nil {
			return "", err
		}
		var original []byte
		if la, ok := cur.GetObjectMeta().Annotations[patch.LastAppliedAnnotation]; ok {
			if original, err = atStoredVersion(k, []byte(la)); err != nil {
				return "", fmt.Errorf("read the %s annotation of %s %q: %w", patch.LastAppliedAnnotation, k.Kind, m.Name, err)
			}
		} else if !warned {
			warned = true
			fmt.Fprintf(a.Warnings, "Warning: resource %s/%s is missing the %s annotation which is required by skiff apply. "+
				"skiff apply should only be used on resources created declaratively by skiff apply. "+
				"The missing annotation will be patched automatically.\n", k.GroupResource(), m.Name, patch.LastAppliedAnnotation)
		}
		current, err := json.Marshal(cur)
		if err != nil {
			return "", err
		}
		pt, p, err := patch.ThreeWayFor(k.APIVersion(), k.Kind, original, modified, current)
		if err != nil {
			return "", fmt.Errorf("compute the patch of %s %q: %w", k.Kind, m.Name, err)
		}
		if string(p) == "{}" {
			return Unchanged, nil
		}
		patched, err := patch.Apply(pt, k.APIVersion(), k.Kind, current, p)
		if err != nil {
			return "", fmt.Errorf("apply the patch %s to %s %q: %w", p, k.Kind, m.Name, err)
		}
		desired, err := api.DecodeJSON(k, patched)
		if err != nil {
			return "", fmt.Errorf("decode the patched %s %q: %w", k.Kind, m.Name, err)
		}
		if same, err := sameOnceDefaulted(desired, cur); err != nil {
			return "", err
		} else if same {
			return Unchanged, nil
		}
		_, err = cl.Update(ctx, desired)
		if api.IsConflict(err) && attempt < 3 {
			continue // someone wrote in between: read again
		}
		if err != nil {
			return "", err
		}
		return Configured, nil
	}
}

// sameOnceDefaulted reports whether desired, with the defaults the server
// sets, is the live object cur.
func sameOnceDefaulted(desired, cur api.Object) (bool, error) {
	d := api.Clone(desired)
	api.SetDefaults(d)
	return SameObject(d, cur)
}

// atStoredVersion converts the JSON object data of k (a last-applied
// annotation, which kubectl writes at the version of its file) to the
// stored version; data at the stored version, or naming no version k
// serves, is returned as it is.
func atStoredVersion(k *api.Kind, data []byte) ([]byte, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
	}
	if json.Unmarshal(data, &head) != nil {
		return data, nil
	}
	sv, ok := k.ServedAtAPIVersion(head.APIVersion)
	if !ok || sv == nil {
		return data, nil
	}
	return k.ConvertToStored(sv, data)
}

// AppliedConfiguration is the file's object as apply writes it: its JSON,
// limited to the fields the file writes (written, the document as parsed;
// nil when unknown), with the last-applied annotation set to that same
// JSON without the annotation, as kubectl's GetModifiedConfiguration.
//
// The values are the typed object's (quantities in canonical form, as the
// server stores them); the fields are the file's, so that a zero value the
// Go type prints but the file never set (targetPort: 0, creationTimestamp:
// null) is not taken for a change. A file at an older served version of k
// has its fields converted to the stored version first (v1beta1's request
// fields are v1's request.exactly fields), and the annotation is converted
// back to the file's version.
func AppliedConfiguration(k *api.Kind, obj api.Object, written map[string]any) ([]byte, error) {
	m, err := toMap(obj)
	if err != nil {
		return nil, err
	}
	var fileVersion *api.ServedVersion
	if written != nil {
		av, _ := written["apiVersion"].(string)
		if sv, ok := k.ServedAtAPIVersion(av); ok && sv != nil {
			fileVersion = sv
			written = runtime.DeepCopyJSON(written)
			if err := k.ConvertTreeToStored(sv, written); err != nil {
				return nil, err
			}
		}
	}
	if written != nil && sameIdentity(m, written) {
		name, namespace := obj.GetObjectMeta().Name, obj.GetObjectMeta().Namespace
		keepWritten(m, written)
		// Identity is the object's even where the file left it to the
		// command line (-n) or to its List (kind).
		tm := obj.GetTypeMeta()
		if tm.APIVersion != "" && tm.Kind != "" {
			m["apiVersion"], m["kind"] = tm.APIVersion, tm.Kind
		}
		wm, _ := m["metadata"].(map[string]any)
		if wm == nil {
			wm = map[string]any{}
			m["metadata"] = wm
		}
		wm["name"] = name
		if namespace != "" {
			wm["namespace"] = namespace
		}
	}
	meta, _ := m["metadata"].(map[string]any)
	dropNulls(m)
	if meta == nil {
		meta = map[string]any{}
		m["metadata"] = meta
	}
	ann, _ := meta["annotations"].(map[string]any)
	delete(ann, patch.LastAppliedAnnotation)
	if len(ann) == 0 {
		delete(meta, "annotations")
	}
	applied, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if fileVersion != nil {
		if applied, err = k.ConvertFromStored(fileVersion, applied); err != nil {
			return nil, err
		}
	}
	if ann == nil {
		ann = map[string]any{}
	}
	ann[patch.LastAppliedAnnotation] = string(applied) + "\n"
	meta["annotations"] = ann
	return json.Marshal(m)
}

// sameIdentity reports whether the parsed document w is the object m (same
// name), a guard against pairing a document with another's fields.
func sameIdentity(m, w map[string]any) bool {
	mm, _ := m["metadata"].(map[string]any)
	wm, _ := w["metadata"].(map[string]any)
	return mm != nil && wm != nil && mm["name"] == wm["name"]
}

// keepWritten removes from typed (the JSON of a typed object) every key
// that written (the document it was decoded from) does not have. Lists
// pair by index: the typed list was decoded from the written one.
func keepWritten(typed, written any) {
	switch t := typed.(type) {
	case map[string]any:
		w, ok := written.(map[string]any)
		if !ok {
			return
		}
		for k, v := range t {
			wv, ok := w[k]
			if !ok {
				delete(t, k)
				continue
			}
			keepWritten(v, wv)
		}
	case []any:
		w, ok := written.([]any)
		if !ok || len(w) != len(t) {
			return
		}
		for i := range t {
			keepWritten(t[i], w[i])
		}
	}
}

// dropNulls removes the keys whose value is null, at every depth.
func dropNulls(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if e == nil {
				delete(t, k)
			} else {
				dropNulls(e)
			}
		}
	case []any:
		for _, e := range t {
			dropNulls(e)
		}
	}
}

// DocKey names a document of a stream as api.Document does (Index,
// Path).
type DocKey struct {
	Index int
	Path  string
}

// WrittenFields parses a YAML or JSON stream into the generic form of each
// object, keyed as api.DecodeStream numbers its documents (empty documents
// skipped, List items by "items[N]"). A stream it cannot read gives what
// it read so far: apply then compares the typed object's every field.
func WrittenFields(data []byte) map[DocKey]map[string]any {
	out := map[DocKey]map[string]any{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))), 4096)
	for index := 0; ; {
		var v any
		if err := dec.Decode(&v); err != nil {
			return out
		}
		m, ok := v.(map[string]any)
		if v == nil {
			continue // an empty document
		}
		if ok {
			if items, isList := m["items"].([]any); isList && strings.HasSuffix(fmt.Sprint(m["kind"]), "List") {
				for i, it := range items {
					if im, ok := it.(map[string]any); ok {
						out[DocKey{index, fmt.Sprintf("items[%d]", i)}] = im
					}
				}
			} else {
				out[DocKey{index, ""}] = m
			}
		}
		index++
	}
}

// SameObject compares two objects by their JSON form (managedFields
// aside).
func SameObject(a, b api.Object) (bool, error) {
	am, err := toMap(withTypeMeta(a))
	if err != nil {
		return false, err
	}
	bm, err := toMap(withTypeMeta(b))
	if err != nil {
		return false, err
	}
	for _, m := range []map[string]any{am, bm} {
		if meta, ok := m["metadata"].(map[string]any); ok {
			delete(meta, "managedFields")
		}
	}
	return reflect.DeepEqual(am, bm), nil
}

func toMap(o api.Object) (map[string]any, error) {
	data, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// withTypeMeta fills apiVersion and kind, which servers may leave out of
// list items.
func withTypeMeta(obj api.Object) api.Object {
	if obj.GetTypeMeta().Kind == "" {
		api.SetTypeMeta(obj)
	}
	return obj
}
