package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// expectedErrors reads the "# error: ..." header lines of a testdata file.
func expectedErrors(data []byte) []string {
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if s, ok := strings.CutPrefix(line, "# error: "); ok {
			out = append(out, strings.TrimSpace(s))
		}
	}
	return out
}

// decodeAndValidate decodes a stream, defaults and validates every object,
// as the API server would, and returns the objects and every error message.
func decodeAndValidate(tb testing.TB, data []byte) ([]Object, []string) {
	tb.Helper()
	var objs []Object
	var msgs []string
	for _, d := range DecodeStream(data) {
		if d.Err != nil {
			msgs = append(msgs, d.Err.Error())
			continue
		}
		if errs := Validate(d.Object); len(errs) > 0 { // before defaults, as the CLI
			msgs = append(msgs, NewInvalid(d.Kind, d.Object.GetObjectMeta().Name, errs).Error())
		}
		SetDefaults(d.Object)
		if errs := Validate(d.Object); len(errs) > 0 { // after, as the API server
			msgs = append(msgs, NewInvalid(d.Kind, d.Object.GetObjectMeta().Name, errs).Error())
		}
		objs = append(objs, d.Object)
	}
	return objs, msgs
}

func TestTestdata(t *testing.T) {
	files, err := filepath.Glob("testdata/*.*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			objs, msgs := decodeAndValidate(t, data)
			all := strings.Join(msgs, "\n")
			switch {
			case strings.HasPrefix(name, "valid-"):
				if len(msgs) > 0 {
					t.Fatalf("unexpected errors:\n%s", all)
				}
				if len(objs) == 0 {
					t.Fatal("no objects decoded")
				}
			case strings.HasPrefix(name, "invalid-"):
				want := expectedErrors(data)
				if len(want) == 0 {
					t.Fatal("invalid-* file has no '# error: ' header")
				}
				for _, w := range want {
					if !strings.Contains(all, w) {
						t.Errorf("missing error %q in:\n%s", w, all)
					}
				}
			default:
				t.Fatalf("testdata files are named valid-* or invalid-*")
			}
		})
	}
}

// TestRoundTrip: a decoded, defaulted object encodes to JSON and YAML that
// decode strictly to the same object, and defaulting is idempotent.
func TestRoundTrip(t *testing.T) {
	files, _ := filepath.Glob("testdata/valid-*")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range DecodeStream(data) {
			if d.Err != nil {
				t.Fatalf("%s: %v", f, d.Err)
			}
			SetDefaults(d.Object)
			j1, err := json.Marshal(d.Object)
			if err != nil {
				t.Fatal(err)
			}
			o2, err := DecodeJSON(d.Kind, j1)
			if err != nil {
				t.Fatalf("%s: decode own JSON: %v\n%s", f, err, j1)
			}
			SetDefaults(o2)
			j2, _ := json.Marshal(o2)
			if !bytes.Equal(j1, j2) {
				t.Errorf("%s: JSON round trip differs:\n%s\n%s", f, j1, j2)
			}
			y, err := yaml.Marshal(d.Object)
			if err != nil {
				t.Fatal(err)
			}
			o3, k3, err := DecodeAny(y)
			if err != nil || k3 != d.Kind {
				t.Fatalf("%s: decode own YAML: %v\n%s", f, err, y)
			}
			j3, _ := json.Marshal(o3)
			if !bytes.Equal(j1, j3) {
				t.Errorf("%s: YAML round trip differs:\n%s\n%s", f, j1, j3)
			}
		}
	}
}

func TestDecodeStreamShapes(t *testing.T) {
	pod := func(name string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec: {containers: [{name: c, image: busybox}]}\n"
	}
	tests := []struct {
		name  string
		in    string
		names []string // "" for a document with an error
	}{
		{"one", pod("a"), []string{"a"}},
		{"two with comments", "# hi\n" + pod("a") + "--- # second\n" + pod("b"), []string{"a", "b"}},
		{"leading and trailing separators", "---\n" + pod("a") + "---\n", []string{"a"}},
		{"CRLF", strings.ReplaceAll(pod("a")+"---\n"+pod("b"), "\n", "\r\n"), []string{"a", "b"}},
		{"bad middle document", pod("a") + "---\nkind: Pod\n---\n" + pod("c"), []string{"a", "", "c"}},
		{"json stream", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}} {"apiVersion":"v1","kind":"Namespace","metadata":{"name":"y"}}`, []string{"x", "y"}},
		{"typed list", `{"apiVersion":"v1","kind":"PodList","items":[{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]}}]}`, []string{"p"}},
		{"flow mapping", `{apiVersion: v1, kind: Namespace, metadata: {name: f}}`, []string{"f"}},
		{"empty", "", nil},
		{"only comments", "# nothing\n---\n# here\n", nil},
		{"scalar", "hello", []string{""}},
		{"bad separator", pod("a") + "--- x: 1\n" + pod("b"), []string{"a", "", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs := DecodeStream([]byte(tt.in))
			var got []string
			for _, d := range docs {
				if d.Err != nil {
					got = append(got, "")
					var de *DecodeError
					if !errors.As(d.Err, &de) {
						t.Errorf("error is %T, not *DecodeError", d.Err)
					}
					continue
				}
				got = append(got, d.Object.GetObjectMeta().Name)
			}
			if strings.Join(got, ",") != strings.Join(tt.names, ",") || len(got) != len(tt.names) {
				t.Fatalf("got %q, want %q (%+v)", got, tt.names, docs)
			}
		})
	}
}

func TestDecodeErrorsNamePaths(t *testing.T) {
	in := `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: 1}}
spec:
  replicas: "3"
  paused: yes-please
  template:
    spec:
      containers:
      - name: c
        image: i
        resources: {limits: {cpu: lots}}
        ports: [{containerPort: 99999999999}]
      volumes: [{name: v, nfs: {server: x, path: /}}]
`
	docs := DecodeStream([]byte(in))
	if len(docs) != 1 || docs[0].Err == nil || docs[0].Kind == nil {
		t.Fatalf("want one failed Deployment document, got %+v", docs)
	}
	var fe FieldErrors
	if !errors.As(docs[0].Err, &fe) {
		t.Fatalf("error does not carry FieldErrors: %v", docs[0].Err)
	}
	msg := docs[0].Err.Error()
	for _, want := range []string{
		`document 1 at line 1 (Deployment "web"): error validating data: [`,
		`metadata.labels[app]: Invalid value: 1: expected string, got number (quote it in YAML)`,
		`spec.replicas: Invalid value: "3": expected integer, got string`,
		`spec.paused: Invalid value: "yes-please": expected boolean, got string`,
		`spec.template.spec.containers[0].resources.limits[cpu]: Invalid value: "lots": quantities must match`,
		`spec.template.spec.containers[0].ports[0].containerPort: Invalid value: 99999999999: expected a 32-bit integer`,
		`spec.template.spec.volumes[0].nfs: field not supported by skiff`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in\n%s", want, msg)
		}
	}
}

func TestDecodeJSON(t *testing.T) {
	k, _ := LookupResource("pods")
	if _, err := DecodeJSON(k, []byte(`{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]}}`)); err != nil {
		t.Fatalf("body without apiVersion/kind: %v", err)
	}
	if _, err := DecodeJSON(k, []byte(`{"kind":"Service","apiVersion":"v1"}`)); err == nil {
		t.Fatal("a Service body decoded as a Pod")
	}
	_, err := DecodeJSON(k, []byte(`{"metadata":{"name":"p","labelz":{}}}`))
	if err == nil || !strings.Contains(err.Error(), `metadata.labelz: unknown field: did you mean "labels"?`) {
		t.Fatalf("got %v", err)
	}
	if _, err := DecodeJSON(k, []byte(`{"spec":`)); err == nil {
		t.Fatal("truncated JSON decoded")
	}
}

// TestDuplicateKeys: a key given twice in one object is an error naming its
// path on every decode path (the YAML ones are in
// testdata/invalid-duplicate-keys.yaml), as kube-apiserver's strict decoding.
func TestDuplicateKeys(t *testing.T) {
	pods, _ := LookupResource("pods")
	stream := func(in string) []string {
		var out []string
		for _, d := range DecodeStream([]byte(in)) {
			if d.Err != nil {
				out = append(out, d.Err.Error())
			}
		}
		return out
	}
	cases := []struct {
		name   string
		decode func(string) []string
		in     string
		want   []string
	}{
		{"JSON stream, top level and nested", stream,
			`{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "metadata": {"name": "q"},
			  "spec": {"containers": [{"name": "c", "image": "cuda", "image": "busybox"}]}}
			{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n", "labels": {"a": "1", "a": "2"}}}`,
			[]string{`document 1 (Pod "q"): error validating data: [metadata: duplicate field, spec.containers[0].image: duplicate field]`,
				`document 2 (Namespace "n"): error validating data: metadata.labels.a: duplicate field`}},
		{"JSON List item", stream,
			`{"apiVersion": "v1", "kind": "List", "items": [
			  {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ok"}},
			  {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"k": "1", "k": "2"}}]}`,
			[]string{`document 1, items[1] (ConfigMap "cfg"): error validating data: data.k: duplicate field`}},
		{"JSON List key", stream,
			`{"apiVersion": "v1", "kind": "List", "items": [], "items": []}`,
			[]string{`document 1 (List): error validating data: items: duplicate field`}},
		{"duplicate with an unknown field: both reported", stream,
			`{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i", "image": "j", "imagee": "k"}]}}`,
			[]string{`[spec.containers[0].imagee: unknown field: did you mean "image"?, spec.containers[0].image: duplicate field]`}},
		{"API body (DecodeJSON)", func(in string) []string {
			if _, err := DecodeJSON(pods, []byte(in)); err != nil {
				return []string{err.Error()}
			}
			return nil
		}, `{"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "cuda", "image": "busybox"}]}}`,
			[]string{`(Pod "p"): error validating data: spec.containers[0].image: duplicate field`}},
		{"one YAML object (DecodeAny)", func(in string) []string {
			if _, _, err := DecodeAny([]byte(in)); err != nil {
				return []string{err.Error()}
			}
			return nil
		}, "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: c, image: a, image: b}\n",
			[]string{`(Pod "p"): error validating data: spec.containers[0].image: duplicate field: again at line 6`}},
		{"request body (UnmarshalStrict)", func(in string) []string {
			var b Binding
			if err := UnmarshalStrict([]byte(in), &b); err != nil {
				return []string{err.Error()}
			}
			return nil
		}, `{"metadata": {"name": "p"}, "target": {"name": "n1", "name": "n2"}, "targt": {}}`,
			[]string{`[targt: unknown field, target.name: duplicate field]`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.decode(c.in)
			if len(got) != len(c.want) {
				t.Fatalf("got %d errors, want %d:\n%s", len(got), len(c.want), strings.Join(got, "\n"))
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("error %d: missing %q in\n%s", i, w, got[i])
				}
			}
		})
	}
}

func TestSecretAndBytes(t *testing.T) {
	docs := DecodeStream([]byte("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {a: not-base64!}\n"))
	if docs[0].Err == nil || !strings.Contains(docs[0].Err.Error(), "data[a]: Invalid value") {
		t.Fatalf("bad base64 accepted: %v", docs[0].Err)
	}
}

// TestExamples parses every YAML file of the repository's examples/.
func TestExamples(t *testing.T) {
	var files []string
	for _, pat := range []string{"../examples/*.yaml", "../examples/*.yml", "../examples/*/*.yaml", "../examples/*/*.yml"} {
		m, _ := filepath.Glob(pat)
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Skip("no examples/ directory yet")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			objs, msgs := decodeAndValidate(t, data)
			if len(msgs) > 0 {
				t.Fatalf("%s", strings.Join(msgs, "\n"))
			}
			if len(objs) == 0 {
				t.Fatal("no objects")
			}
		})
	}
}

func FuzzDecodeStream(f *testing.F) {
	files, _ := filepath.Glob("testdata/*")
	examples, _ := filepath.Glob("../examples/*.yaml")
	for _, p := range append(files, examples...) {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("---\n---\n"))
	f.Add([]byte(`{"apiVersion":"v1","kind":"List","items":[1,{}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			t.Skip("input too large")
		}
		for _, d := range DecodeStream(data) {
			if d.Err != nil {
				_ = d.Err.Error()
				continue
			}
			if d.Object == nil || d.Kind == nil {
				t.Fatalf("document %d has neither object nor error", d.Index)
			}
			roundTrip(t, d.Kind, d.Object, Validate(d.Object) == nil)
			_ = Validate(d.Object)
			SetDefaults(d.Object)
			_ = Validate(d.Object).Error()
			_ = ValidateUpdate(d.Object, Clone(d.Object))
		}
	})
}

// roundTrip checks decode → encode → decode: the JSON of a decoded object
// decodes strictly as its kind, to an object that encodes the same.
// For a valid object, every quantity also keeps its value (apimachinery
// prints a quantity past 10^21 wrong; validation must refuse those).
func roundTrip(t *testing.T, k *Kind, o Object, valid bool) {
	t.Helper()
	enc, err := json.Marshal(o)
	if err != nil {
		t.Fatalf("encode %s: %v", k.Kind, err)
	}
	o2, err := DecodeJSON(k, enc)
	if err != nil {
		t.Fatalf("re-decode %s: %v\n%s", k.Kind, err, enc)
	}
	if path, ok := sameQuantities(reflect.ValueOf(o), reflect.ValueOf(o2), ""); valid && !ok {
		t.Fatalf("valid %s: quantity %s changes value through encode → decode:\n%s", k.Kind, path, enc)
	}
	enc2, err := json.Marshal(o2)
	if err != nil {
		t.Fatalf("re-encode %s: %v", k.Kind, err)
	}
	if !bytes.Equal(enc, enc2) {
		t.Fatalf("%s is not stable through decode → encode → decode:\n%s\n%s", k.Kind, enc, enc2)
	}
}

// sameQuantities walks a and b (values of one type) and compares every
// Quantity by value; path is the first that differs.
func sameQuantities(a, b reflect.Value, path string) (string, bool) {
	if a.Type() == quantityType {
		qa, qb := a.Interface().(Quantity), b.Interface().(Quantity)
		return path, qa.Cmp(qb) == 0
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return path, a.IsNil() == b.IsNil()
		}
		return sameQuantities(a.Elem(), b.Elem(), path)
	case reflect.Struct:
		for i := range a.NumField() {
			if !a.Type().Field(i).IsExported() {
				continue
			}
			if p, ok := sameQuantities(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); !ok {
				return p, false
			}
		}
	case reflect.Slice:
		if a.Len() != b.Len() {
			return path, false
		}
		for i := range a.Len() {
			if p, ok := sameQuantities(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i)); !ok {
				return p, false
			}
		}
	case reflect.Map:
		if a.Len() != b.Len() {
			return path, false
		}
		for _, key := range a.MapKeys() {
			bv := b.MapIndex(key)
			if !bv.IsValid() {
				return fmt.Sprintf("%s[%v]", path, key), false
			}
			if p, ok := sameQuantities(a.MapIndex(key), bv, fmt.Sprintf("%s[%v]", path, key)); !ok {
				return p, false
			}
		}
	}
	return path, true
}
