package apiserver

import (
	"bytes"
	"encoding/json"
	"net/http"

	"sigs.k8s.io/yaml"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/patch"
)

// # Further served versions
//
// A kind may be served at versions besides the stored one (api.Kind.Served,
// api/versions.go: kueue.x-k8s.io v1beta1 beside v1beta2). A request to
// /apis/GROUP/OTHER/... is served by the same handlers as the stored
// version: its body is converted to the stored version before decoding
// (toStoredBody), and what the handlers write is converted back on the way
// out (versionWriter), with the version's deprecation warning as a Warning
// header. Discovery lists every served version, the stored one preferred,
// as Kubernetes lists a group's versions.
//
// Limits: a JSON patch (RFC 6902) names paths of the version it was written
// for; it is applied to the stored version unconverted, so a patch at a
// renamed path fails with the path it names. Merge, strategic merge and
// apply patches are converted as partial objects.

// servedVersionOf is the served version of k at version (nil: stored).
func servedVersionOf(k *api.Kind, version string) *api.ServedVersion {
	sv, _ := k.ServedAt(version)
	return sv
}

// toStoredBody converts a request body at info's served version to the
// stored one. Bodies that are not one JSON or YAML object (a JSON patch,
// a DeleteOptions) come back unchanged but for their apiVersion.
func toStoredBody(info *requestInfo, contentType string, body []byte) ([]byte, error) {
	if info.served == nil || len(bytes.TrimSpace(body)) == 0 {
		return body, nil
	}
	switch patch.ParseType(contentType) {
	case patch.JSONPatch:
		return body, nil
	case patch.ApplyPatch:
		j, err := yaml.YAMLToJSON(body)
		if err != nil {
			return body, nil // the apply path reports it
		}
		body = j
	}
	return info.kind.ConvertToStored(info.served, body)
}

// versionWriter converts every JSON value a handler writes (one object,
// list, table or watch event per Write, as writeJSON and the watch
// encoder write them) from the stored version to the request's.
type versionWriter struct {
	http.ResponseWriter
	kind   *api.Kind
	served *api.ServedVersion
}

// Unwrap lets http.ResponseController reach Flush (watch).
func (w *versionWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *versionWriter) Write(b []byte) (int, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil || dec.More() {
		return w.ResponseWriter.Write(b) // not one JSON value: as it is
	}
	if !w.convert(v) {
		return w.ResponseWriter.Write(b)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return w.ResponseWriter.Write(b)
	}
	if bytes.HasSuffix(b, []byte("\n")) {
		out = append(out, '\n')
	}
	if _, err := w.ResponseWriter.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// convert converts v in place; it reports whether anything was of k.
func (w *versionWriter) convert(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	k := w.kind
	kind, _ := m["kind"].(string)
	av, _ := m["apiVersion"].(string)
	switch {
	case kind == k.Kind && av == k.APIVersion():
		return k.ConvertTreeFromStored(w.served, m) == nil
	case kind == k.Kind+"List":
		if av == k.APIVersion() {
			m["apiVersion"] = k.APIVersionOf(w.served)
		}
		items, _ := m["items"].([]any)
		for _, it := range items {
			w.convert(it)
		}
		return true
	case kind == "Table":
		rows, _ := m["rows"].([]any)
		changed := false
		for _, r := range rows {
			if rm, ok := r.(map[string]any); ok {
				changed = w.convert(rm["object"]) || changed
			}
		}
		return changed
	case kind == "" && m["type"] != nil && m["object"] != nil: // a watch event
		return w.convert(m["object"])
	}
	return false
}
