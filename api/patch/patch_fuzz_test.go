package patch

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// fuzzDocs are documents of the fuzz seeds: the test pod and a deployment.
var fuzzDocs = []string{
	pod,
	`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","labels":{"app":"web"}},
	  "spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},
	   "template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"a","image":"x","ports":[{"containerPort":80}]}]}}}}`,
	`{"a":["xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"]}`,
	`{}`,
}

// checkPatchResult: a failed patch is an *Error with a reason (or
// ErrNoSchema); a patched document is one JSON object.
func checkPatchResult(t *testing.T, what string, out []byte, err error) (map[string]any, bool) {
	t.Helper()
	if err != nil {
		var pe *Error
		if !errors.Is(err, ErrNoSchema) && (!errors.As(err, &pe) || pe.Reason < Malformed || pe.Reason > TooLarge) {
			t.Fatalf("%s: error without a reason: %T %v", what, err, err)
		}
		return nil, false
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil || m == nil {
		t.Fatalf("%s: patched document is not a JSON object (%v): %.200s", what, err, out)
	}
	return m, true
}

// FuzzJSONPatch: any operations on any document fail with a reason or give
// one JSON object, in bounded memory (copies add at most
// MaxJSONPatchCopyBytes); operations that only test change nothing.
func FuzzJSONPatch(f *testing.F) {
	doubling := "[" + strings.TrimSuffix(strings.Repeat(`{"op":"copy","from":"/a","path":"/b"},{"op":"copy","from":"/b","path":"/a/-"},`, 24), ",") + "]"
	for _, ops := range []string{
		`[{"op":"replace","path":"/spec/replicas","value":5}]`,
		`[{"op":"add","path":"/spec/containers/-","value":{"name":"b","image":"y"}}]`,
		`[{"op":"remove","path":"/metadata/labels/app"}]`,
		`[{"op":"test","path":"/metadata/name","value":"p"},{"op":"test","path":"/spec/containers/0/name","value":"main"}]`,
		`[{"op":"move","from":"/metadata/labels","path":"/metadata/annotations"}]`,
		`[{"op":"add","path":"/metadata/labels/nvidia.com~1gpu","value":"true"}]`,
		`[{"op":"replace","path":"/spec/containers/3/image","value":"z"}]`,
		`[{"op":"copy","from":"","path":"/x"}]`,
		`[{"op":"add","path":"/spec/containers/-1","value":1}]`,
		`[{"op":"frob","path":"/spec"}]`, `{"op":"add"}`, `[{"op":`, `[]`, `null`,
		doubling,
	} {
		for _, doc := range fuzzDocs {
			f.Add(doc, ops)
		}
	}
	f.Fuzz(func(t *testing.T, doc, ops string) {
		if len(doc) > 16<<10 || len(ops) > 16<<10 {
			t.Skip("input too large")
		}
		var before map[string]any
		if json.Unmarshal([]byte(doc), &before) != nil || before == nil {
			return // the server patches objects only
		}
		out, err := JSON([]byte(doc), []byte(ops))
		if bound := 8*(len(doc)+len(ops)) + 2*MaxJSONPatchCopyBytes; err == nil && len(out) > bound {
			t.Fatalf("a patch of %d bytes on %d grew the document to %d bytes (bound %d)", len(ops), len(doc), len(out), bound)
		}
		got, ok := checkPatchResult(t, "json patch", out, err)
		if !ok {
			return
		}
		var list []map[string]any
		if json.Unmarshal([]byte(ops), &list) != nil {
			return
		}
		for _, op := range list {
			if op["op"] != "test" {
				return
			}
		}
		if !reflect.DeepEqual(before, got) {
			t.Fatalf("test operations changed the document:\n%s\n%s", doc, out)
		}
	})
}

// FuzzMergePatch: an RFC 7386 merge patch fails with a reason or gives one
// JSON object, and applying it again changes nothing (merge patches are
// idempotent).
func FuzzMergePatch(f *testing.F) {
	for _, p := range []string{
		`{"metadata":{"labels":{"app":null,"tier":"b"}}}`, `{"spec":{"containers":[{"name":"x"}]}}`,
		`{"a":{"b":{"c":null}}}`, `{"metadata":null}`, `null`, `[]`, `{"a":[{"b":null}]}`, `{`,
	} {
		for _, doc := range fuzzDocs {
			f.Add(doc, p)
		}
	}
	f.Fuzz(func(t *testing.T, doc, p string) {
		if len(doc) > 16<<10 || len(p) > 16<<10 {
			t.Skip("input too large")
		}
		out, err := Merge([]byte(doc), []byte(p))
		once, ok := checkPatchResult(t, "merge patch", out, err)
		if !ok {
			return
		}
		out2, err := Merge(out, []byte(p))
		twice, ok := checkPatchResult(t, "merge patch again", out2, err)
		if !ok {
			t.Fatalf("merge patch %s applies to %s but not to its result %s", p, doc, out)
		}
		if !reflect.DeepEqual(once, twice) {
			t.Fatalf("merge patch %s is not idempotent on %s:\n%s\n%s", p, doc, out, out2)
		}
	})
}

// fuzzKinds are the apiVersion/kind pairs FuzzStrategicPatch picks from
// (the last has no schema: ErrNoSchema).
var fuzzKinds = [][2]string{{"v1", "Pod"}, {"apps/v1", "Deployment"}, {"v1", "Service"}, {"v1", "Node"}, {"skiff.dev/v1", "PodTrace"}}

// FuzzStrategicPatch: a strategic merge patch of any kind fails with a
// reason (or ErrNoSchema) or gives one JSON object; a patch without
// directives ($patch, $retainKeys, ...) and without two list items of one
// merge key gives the same object when applied again.
func FuzzStrategicPatch(f *testing.F) {
	for _, p := range []string{
		`{"spec":{"containers":[{"name":"main","image":"cuda:13"}]}}`,
		`{"spec":{"containers":[{"name":"main","env":[{"name":"B","value":"3"},{"name":"C","value":"4"}]}]}}`,
		`{"spec":{"containers":[{"name":"sidecar","$patch":"delete"}]}}`,
		`{"metadata":{"finalizers":["c/z"],"$deleteFromPrimitiveList/finalizers":["a/x"]}}`,
		`{"spec":{"volumes":[{"name":"data","$patch":"replace","hostPath":{"path":"/x"}}]}}`,
		`{"spec":{"$setElementOrder/containers":[{"name":"sidecar"},{"name":"main"}]}}`,
		`{"spec":{"template":{"spec":{"containers":[{"name":"a","ports":[{"containerPort":81}]}]}}}}`,
		`{"spec":{"tolerations":[{"key":"gpu","$patch":"delete"}]}}`,
		`{"$patch":"replace","metadata":{"name":"q"}}`, `{"spec":{"containers":"x"}}`, `null`, `[]`,
	} {
		for i, doc := range fuzzDocs[:2] {
			f.Add(doc, p, uint8(i))
		}
	}
	f.Fuzz(func(t *testing.T, doc, p string, which uint8) {
		if len(doc) > 16<<10 || len(p) > 16<<10 {
			t.Skip("input too large")
		}
		k := fuzzKinds[int(which)%len(fuzzKinds)]
		out, err := Strategic(k[0], k[1], []byte(doc), []byte(p))
		once, ok := checkPatchResult(t, "strategic merge patch", out, err)
		if !ok || strings.Contains(p, "$") || hasDuplicateNames(p) {
			return
		}
		out2, err := Strategic(k[0], k[1], out, []byte(p))
		twice, ok := checkPatchResult(t, "strategic merge patch again", out2, err)
		if ok && !reflect.DeepEqual(once, twice) {
			t.Fatalf("strategic merge patch %s of %s is not idempotent on %s:\n%s\n%s", p, k[1], doc, out, out2)
		}
	})
}

// hasDuplicateNames reports whether some list of objects in the JSON p
// has two items of one "name", "key", "containerPort", "mountPath", "ip",
// "type" or "port" (the merge keys of skiff's kinds): strategic merge
// appends such a pair once per application.
func hasDuplicateNames(p string) bool {
	var v any
	if json.Unmarshal([]byte(p), &v) != nil {
		return false
	}
	var walk func(v any) bool
	walk = func(v any) bool {
		switch x := v.(type) {
		case map[string]any:
			for _, c := range x {
				if walk(c) {
					return true
				}
			}
		case []any:
			seen := map[string]bool{}
			for _, item := range x {
				if m, ok := item.(map[string]any); ok {
					for _, key := range []string{"name", "key", "containerPort", "mountPath", "ip", "type", "port", "devicePath"} {
						if kv, ok := m[key]; ok {
							b, _ := json.Marshal(kv)
							id := key + "=" + string(b)
							if seen[id] {
								return true
							}
							seen[id] = true
						}
					}
				}
				if walk(item) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}
