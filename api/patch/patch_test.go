package patch

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// pod is the document the strategic cases patch: two containers, one with
// a command, env, ports, a GPU limit and a mount; two volumes; a toleration.
const pod = `{"apiVersion":"v1","kind":"Pod",
 "metadata":{"name":"p","labels":{"app":"web","tier":"a"},"finalizers":["a/x","b/y"]},
 "spec":{"containers":[
   {"name":"main","image":"cuda:12","command":["run"],
    "env":[{"name":"A","value":"1"},{"name":"B","value":"2"}],
    "ports":[{"containerPort":80,"protocol":"TCP"},{"containerPort":9090,"name":"metrics"}],
    "resources":{"limits":{"nvidia.com/gpu":"1"}},
    "volumeMounts":[{"name":"data","mountPath":"/data"}]},
   {"name":"sidecar","image":"busybox"}],
  "volumes":[{"name":"data","emptyDir":{}},{"name":"cfg","configMap":{"name":"c"}}],
  "tolerations":[{"key":"gpu","operator":"Exists"}]}}`

// The expectations are what kube-apiserver answers for the same patch of
// the same Pod (strategic merge with corev1.Pod's tags).
func TestStrategicPod(t *testing.T) {
	for _, tc := range []struct {
		name  string
		patch string
		// edit turns the decoded pod into the expected result.
		edit   func(p map[string]any)
		reason Reason // when the patch must fail
	}{
		{name: "one container's image keeps every other field",
			patch: `{"spec":{"containers":[{"name":"main","image":"cuda:13"}]}}`,
			edit:  func(p map[string]any) { container(p, 0)["image"] = "cuda:13" }},
		{name: "env merges by name",
			patch: `{"spec":{"containers":[{"name":"main","env":[{"name":"B","value":"3"},{"name":"C","value":"4"}]}]}}`,
			edit: func(p map[string]any) {
				container(p, 0)["env"] = parse(`[{"name":"A","value":"1"},{"name":"B","value":"3"},{"name":"C","value":"4"}]`)
			}},
		{name: "ports merge by containerPort",
			patch: `{"spec":{"containers":[{"name":"main","ports":[{"containerPort":9090,"name":"prom"}]}]}}`,
			edit: func(p map[string]any) {
				container(p, 0)["ports"] = parse(`[{"containerPort":80,"protocol":"TCP"},{"containerPort":9090,"name":"prom"}]`)
			}},
		{name: "volumeMounts merge by mountPath",
			patch: `{"spec":{"containers":[{"name":"main","volumeMounts":[{"name":"cfg","mountPath":"/cfg"}]}]}}`,
			edit: func(p map[string]any) {
				// Without $setElementOrder the patch's items come first (kubectl sends one).
				container(p, 0)["volumeMounts"] = parse(`[{"name":"cfg","mountPath":"/cfg"},{"name":"data","mountPath":"/data"}]`)
			}},
		{name: "a new container comes first without $setElementOrder",
			patch: `{"spec":{"containers":[{"name":"log","image":"fluentbit"}]}}`,
			edit: func(p map[string]any) {
				spec(p)["containers"] = append([]any{parse(`{"name":"log","image":"fluentbit"}`)}, spec(p)["containers"].([]any)...)
			}},
		{name: "a new container placed by $setElementOrder",
			patch: `{"spec":{"$setElementOrder/containers":[{"name":"main"},{"name":"sidecar"},{"name":"log"}],"containers":[{"name":"log","image":"fluentbit"}]}}`,
			edit: func(p map[string]any) {
				spec(p)["containers"] = append(spec(p)["containers"].([]any), parse(`{"name":"log","image":"fluentbit"}`))
			}},
		{name: "a primitive list (command) replaces",
			patch: `{"spec":{"containers":[{"name":"main","command":["other","--x"]}]}}`,
			edit:  func(p map[string]any) { container(p, 0)["command"] = parse(`["other","--x"]`) }},
		{name: "volumes merge by name",
			patch: `{"spec":{"volumes":[{"name":"cfg","configMap":{"name":"d"}}]}}`,
			edit: func(p map[string]any) {
				spec(p)["volumes"] = parse(`[{"name":"data","emptyDir":{}},{"name":"cfg","configMap":{"name":"d"}}]`)
			}},
		{name: "$retainKeys switches a volume's source",
			patch: `{"spec":{"volumes":[{"name":"data","$retainKeys":["hostPath","name"],"hostPath":{"path":"/x"}}]}}`,
			edit: func(p map[string]any) {
				spec(p)["volumes"] = parse(`[{"name":"data","hostPath":{"path":"/x"}},{"name":"cfg","configMap":{"name":"c"}}]`)
			}},
		{name: "$retainKeys naming a key the patch lacks",
			patch:  `{"spec":{"volumes":[{"name":"data","$retainKeys":["name"],"hostPath":{"path":"/x"}}]}}`,
			reason: Malformed},
		{name: "a list of lists where containers belong",
			patch:  `{"spec":{"containers":[["main"]]}}`,
			reason: Malformed},
		{name: "tolerations have no merge key: they replace",
			patch: `{"spec":{"tolerations":[{"key":"spot","operator":"Exists"}]}}`,
			edit:  func(p map[string]any) { spec(p)["tolerations"] = parse(`[{"key":"spot","operator":"Exists"}]`) }},
		{name: "$patch delete removes one container",
			patch: `{"spec":{"containers":[{"name":"sidecar","$patch":"delete"}]}}`,
			edit:  func(p map[string]any) { spec(p)["containers"] = []any{container(p, 0)} }},
		{name: "$patch replace replaces the list",
			patch: `{"spec":{"containers":[{"name":"only","image":"x"},{"$patch":"replace"}]}}`,
			edit:  func(p map[string]any) { spec(p)["containers"] = parse(`[{"name":"only","image":"x"}]`) }},
		{name: "$patch replace replaces a map",
			patch: `{"metadata":{"labels":{"$patch":"replace","new":"1"}}}`,
			edit:  func(p map[string]any) { meta(p)["labels"] = parse(`{"new":"1"}`) }},
		{name: "$patch with an unknown value",
			patch:  `{"spec":{"containers":[{"name":"main","$patch":"frobnicate"}]}}`,
			reason: Malformed},
		{name: "$setElementOrder orders the merged list",
			patch: `{"spec":{"$setElementOrder/containers":[{"name":"sidecar"},{"name":"main"}],"containers":[{"name":"main","image":"cuda:13"}]}}`,
			edit: func(p map[string]any) {
				m := container(p, 0)
				m["image"] = "cuda:13"
				spec(p)["containers"] = []any{container(p, 1), m}
			}},
		{name: "labels merge, null deletes",
			patch: `{"metadata":{"labels":{"tier":null,"env":"prod"}}}`,
			edit:  func(p map[string]any) { meta(p)["labels"] = parse(`{"app":"web","env":"prod"}`) }},
		{name: "finalizers merge as a set",
			patch: `{"metadata":{"finalizers":["c/z","a/x"]}}`,
			edit:  func(p map[string]any) { meta(p)["finalizers"] = parse(`["c/z","a/x","b/y"]`) }},
		{name: "$deleteFromPrimitiveList removes a finalizer",
			patch: `{"metadata":{"$deleteFromPrimitiveList/finalizers":["a/x"]}}`,
			edit:  func(p map[string]any) { meta(p)["finalizers"] = parse(`["b/y"]`) }},
		{name: "not an object",
			patch:  `[{"op":"add"}]`,
			reason: Malformed},
		{name: "not JSON",
			patch:  `{"spec":`,
			reason: Malformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := pod
			got, err := Strategic("v1", "Pod", []byte(before), []byte(tc.patch))
			if tc.reason != 0 {
				var pe *Error
				if !errors.As(err, &pe) || pe.Reason != tc.reason {
					t.Fatalf("got %s, %v; want an error of reason %d", got, err, tc.reason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := parse(pod).(map[string]any)
			tc.edit(want)
			equalJSON(t, got, want)
		})
	}
}

func TestStrategicOtherKinds(t *testing.T) {
	for _, tc := range []struct {
		name, apiVersion, kind, doc, patch, want string
	}{
		{"deployment strategy with $retainKeys", "apps/v1", "Deployment",
			`{"spec":{"replicas":2,"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":1}}}}`,
			`{"spec":{"strategy":{"$retainKeys":["type"],"type":"Recreate"}}}`,
			`{"spec":{"replicas":2,"strategy":{"type":"Recreate"}}}`},
		{"deployment template container by name", "apps/v1", "Deployment",
			`{"spec":{"template":{"spec":{"containers":[{"name":"a","image":"x","args":["1"]},{"name":"b","image":"y"}]}}}}`,
			`{"spec":{"template":{"spec":{"containers":[{"name":"b","image":"z"}]}}}}`,
			`{"spec":{"template":{"spec":{"containers":[{"name":"a","image":"x","args":["1"]},{"name":"b","image":"z"}]}}}}`},
		{"service ports merge by port", "v1", "Service",
			`{"spec":{"clusterIP":"10.96.0.5","ports":[{"port":80,"targetPort":80,"nodePort":30080},{"port":443}]}}`,
			`{"spec":{"ports":[{"port":80,"targetPort":8080}]}}`,
			`{"spec":{"clusterIP":"10.96.0.5","ports":[{"port":80,"targetPort":8080,"nodePort":30080},{"port":443}]}}`},
		{"node conditions merge by type", "v1", "Node",
			`{"status":{"conditions":[{"type":"Ready","status":"True"},{"type":"MemoryPressure","status":"False"}]}}`,
			`{"status":{"conditions":[{"type":"Ready","status":"False"}]}}`,
			`{"status":{"conditions":[{"type":"Ready","status":"False"},{"type":"MemoryPressure","status":"False"}]}}`},
		{"configmap data", "v1", "ConfigMap",
			`{"data":{"a":"1","b":"2"}}`, `{"data":{"a":null,"c":"3"}}`, `{"data":{"b":"2","c":"3"}}`},
		{"scale replicas", "autoscaling/v1", "Scale",
			`{"spec":{"replicas":1},"status":{"replicas":1}}`, `{"spec":{"replicas":5}}`, `{"spec":{"replicas":5},"status":{"replicas":1}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Strategic(tc.apiVersion, tc.kind, []byte(tc.doc), []byte(tc.patch))
			if err != nil {
				t.Fatal(err)
			}
			equalJSON(t, got, parse(tc.want))
		})
	}
}

func TestStrategicWithoutSchema(t *testing.T) {
	_, err := Strategic("skiff.dev/v1", "PodTrace", []byte(`{}`), []byte(`{}`))
	if !errors.Is(err, ErrNoSchema) {
		t.Fatalf("got %v, want ErrNoSchema", err)
	}
	if HasSchema("skiff.dev/v1", "PodTrace") || !HasSchema("apps/v1", "Deployment") {
		t.Error("HasSchema disagrees with the table")
	}
	if got := Supported("example.com/v1", "Widget"); len(got) != 2 || got[0] != JSONPatch || got[1] != MergePatch {
		t.Errorf("custom kind accepts %v", got)
	}
}

func TestJSONPatch(t *testing.T) {
	const doc = `{"metadata":{"name":"d","labels":{"app":"web"}},"spec":{"replicas":2,"containers":[{"name":"a","image":"x"}]}}`
	for _, tc := range []struct {
		name, ops, want string
		reason          Reason
	}{
		{name: "replace", ops: `[{"op":"replace","path":"/spec/replicas","value":5}]`,
			want: `{"metadata":{"name":"d","labels":{"app":"web"}},"spec":{"replicas":5,"containers":[{"name":"a","image":"x"}]}}`},
		{name: "add to a list by index", ops: `[{"op":"add","path":"/spec/containers/-","value":{"name":"b","image":"y"}}]`,
			want: `{"metadata":{"name":"d","labels":{"app":"web"}},"spec":{"replicas":2,"containers":[{"name":"a","image":"x"},{"name":"b","image":"y"}]}}`},
		{name: "remove", ops: `[{"op":"remove","path":"/metadata/labels/app"}]`,
			want: `{"metadata":{"name":"d","labels":{}},"spec":{"replicas":2,"containers":[{"name":"a","image":"x"}]}}`},
		{name: "test then replace", ops: `[{"op":"test","path":"/spec/containers/0/image","value":"x"},{"op":"replace","path":"/spec/containers/0/image","value":"z"}]`,
			want: `{"metadata":{"name":"d","labels":{"app":"web"}},"spec":{"replicas":2,"containers":[{"name":"a","image":"z"}]}}`},
		{name: "escaped key", ops: `[{"op":"add","path":"/metadata/labels/nvidia.com~1gpu","value":"true"}]`,
			want: `{"metadata":{"name":"d","labels":{"app":"web","nvidia.com/gpu":"true"}},"spec":{"replicas":2,"containers":[{"name":"a","image":"x"}]}}`},
		{name: "a failed test", ops: `[{"op":"replace","path":"/spec/replicas","value":5},{"op":"test","path":"/spec/replicas","value":2}]`, reason: NotApplicable},
		{name: "remove a missing path", ops: `[{"op":"remove","path":"/spec/nodeName"}]`, reason: NotApplicable},
		{name: "replace of a missing key adds it (json-patch v4, as kube-apiserver)", ops: `[{"op":"replace","path":"/spec/paused","value":true}]`,
			want: `{"metadata":{"name":"d","labels":{"app":"web"}},"spec":{"replicas":2,"paused":true,"containers":[{"name":"a","image":"x"}]}}`},
		{name: "replace past the end of a list", ops: `[{"op":"replace","path":"/spec/containers/3/image","value":"z"}]`, reason: NotApplicable},
		{name: "unknown op", ops: `[{"op":"frob","path":"/spec"}]`, reason: NotApplicable},
		{name: "replace of the whole document without a value", ops: `[{"op":"replace","path":""}]`, reason: NotApplicable},
		{name: "test of the whole document without a value", ops: `[{"op":"test","path":""}]`, reason: NotApplicable},
		{name: "not a list", ops: `{"op":"add"}`, reason: Malformed},
		{name: "not JSON", ops: `[{"op":`, reason: Malformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := JSON([]byte(doc), []byte(tc.ops))
			if tc.reason != 0 {
				var pe *Error
				if !errors.As(err, &pe) || pe.Reason != tc.reason {
					t.Fatalf("got %s, %v; want an error of reason %d", got, err, tc.reason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			equalJSON(t, got, parse(tc.want))
		})
	}
}

func TestJSONPatchTooLarge(t *testing.T) {
	ops := make([]map[string]any, MaxJSONPatchOperations+1)
	for i := range ops {
		ops[i] = map[string]any{"op": "test", "path": "/a", "value": 1}
	}
	b, _ := json.Marshal(ops)
	var pe *Error
	if _, err := JSON([]byte(`{"a":1}`), b); !errors.As(err, &pe) || pe.Reason != TooLarge {
		t.Fatalf("got %v, want TooLarge", err)
	}
}

// Copies may add at most MaxJSONPatchCopyBytes: a few operations that copy
// a list into itself would otherwise double the document each time.
func TestJSONPatchCopyLimit(t *testing.T) {
	doc := `{"a":["` + strings.Repeat("x", 1<<20) + `"]}`
	for _, tc := range []struct {
		name   string
		copies int
		ok     bool
	}{
		{"two copies of 1 MiB fit", 2, true},
		{"four do not", 4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops := "[" + strings.TrimSuffix(strings.Repeat(`{"op":"copy","from":"/a/0","path":"/a/-"},`, tc.copies), ",") + "]"
			out, err := JSON([]byte(doc), []byte(ops))
			var pe *Error
			switch {
			case tc.ok && err != nil:
				t.Fatal(err)
			case tc.ok && len(out) < (tc.copies+1)<<20:
				t.Fatalf("patched document of %d bytes", len(out))
			case !tc.ok && (!errors.As(err, &pe) || pe.Reason != NotApplicable || !strings.Contains(err.Error(), "exceeding the limit 3145728")):
				t.Fatalf("got %d bytes, %v; want the copy limit (NotApplicable)", len(out), err)
			}
		})
	}
}

// RFC 7386, appendix A, and the edge cases kube-apiserver's library keeps.
func TestMergeRFC7386(t *testing.T) {
	for _, tc := range []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`{"e":null}`, `{"a":1}`, `{"a":1,"e":null}`},
		{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
	} {
		got, err := Merge([]byte(tc.target), []byte(tc.patch))
		if err != nil {
			t.Errorf("merge %s with %s: %v", tc.target, tc.patch, err)
			continue
		}
		equalJSON(t, got, parse(tc.want))
	}
	for _, bad := range []string{`[1]`, `"x"`, `null`, `{`} {
		var pe *Error
		if _, err := Merge([]byte(`{}`), []byte(bad)); !errors.As(err, &pe) || pe.Reason != Malformed {
			t.Errorf("merge patch %s: got %v, want Malformed", bad, err)
		}
	}
}

func TestThreeWay(t *testing.T) {
	// The file as applied last time, and the live object: the server added
	// defaults, a clusterIP and a nodePort, a controller an annotation, a
	// user a label by hand.
	const original = `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s","labels":{"app":"web","old":"x"}},
		"spec":{"type":"NodePort","selector":{"app":"web"},"ports":[{"port":80,"targetPort":80}]}}`
	const current = `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s","uid":"u1","resourceVersion":"7",
		"labels":{"app":"web","old":"x","hand":"y"},"annotations":{"ctl/rev":"3"}},
		"spec":{"type":"NodePort","clusterIP":"10.96.0.9","sessionAffinity":"None","selector":{"app":"web"},
		"ports":[{"port":80,"targetPort":80,"protocol":"TCP","nodePort":31000}]}}`
	for _, tc := range []struct {
		name, original, modified, want string
	}{
		{"unchanged file", original, original, `{}`},
		{"a label dropped from the file is deleted; one added by hand is kept", original,
			`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s","labels":{"app":"web"}},
			"spec":{"type":"NodePort","selector":{"app":"web"},"ports":[{"port":80,"targetPort":80}]}}`,
			`{"metadata":{"labels":{"old":null}}}`},
		{"a changed targetPort patches that port only", original,
			`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s","labels":{"app":"web","old":"x"}},
			"spec":{"type":"NodePort","selector":{"app":"web"},"ports":[{"port":80,"targetPort":8080}]}}`,
			`{"spec":{"$setElementOrder/ports":[{"port":80}],"ports":[{"port":80,"targetPort":8080}]}}`},
		{"no last-applied: nothing is deleted", "",
			`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s","labels":{"app":"web"}},
			"spec":{"type":"NodePort","selector":{"app":"web"},"ports":[{"port":80,"targetPort":80}]}}`,
			`{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var orig []byte
			if tc.original != "" {
				orig = []byte(tc.original)
			}
			got, err := ThreeWay("v1", "Service", orig, []byte(tc.modified), []byte(current))
			if err != nil {
				t.Fatal(err)
			}
			equalJSON(t, got, parse(tc.want))
			// Applying the patch to current gives the file's fields and keeps the server's.
			out, err := Strategic("v1", "Service", []byte(current), got)
			if err != nil {
				t.Fatal(err)
			}
			again, err := ThreeWay("v1", "Service", []byte(tc.modified), []byte(tc.modified), out)
			if err != nil {
				t.Fatal(err)
			}
			equalJSON(t, again, map[string]any{})
			var o map[string]any
			json.Unmarshal(out, &o)
			if spec(o)["clusterIP"] != "10.96.0.9" || spec(o)["ports"].([]any)[0].(map[string]any)["nodePort"] != 31000.0 {
				t.Errorf("allocated fields lost: %s", out)
			}
		})
	}
}

func parse(s string) any {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		panic(err)
	}
	return v
}

func equalJSON(t testing.TB, got []byte, want any) {
	t.Helper()
	var g any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("result is not JSON: %v: %s", err, got)
	}
	if !reflect.DeepEqual(g, want) {
		w, _ := json.Marshal(want)
		t.Errorf("got  %s\nwant %s", got, w)
	}
}

func meta(p map[string]any) map[string]any { return p["metadata"].(map[string]any) }
func spec(p map[string]any) map[string]any { return p["spec"].(map[string]any) }
func container(p map[string]any, i int) map[string]any {
	return spec(p)["containers"].([]any)[i].(map[string]any)
}
