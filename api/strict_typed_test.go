package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	sjson "sigs.k8s.io/json"
)

// TestUnmarshalTypedIsStrict: a request's typed decode (unmarshalTyped,
// go-json-experiment first) gives what sigs.k8s.io/json's UnmarshalStrict
// gives, for every registered kind filled at random, and for the same
// JSON with a name in another case (not a field: left out), a name given
// twice (reported), a value of the wrong type (the same error) and
// invalid UTF-8 (replaced).
func TestUnmarshalTypedIsStrict(t *testing.T) {
	t.Parallel()
	variants := []struct {
		name string
		edit func([]byte) []byte
	}{
		{"as encoded", func(b []byte) []byte { return b }},
		{"a name in another case", func(b []byte) []byte {
			return bytes.Replace(bytes.Replace(b, []byte(`"metadata":`), []byte(`"Metadata":`), 1), []byte(`"name":`), []byte(`"Name":`), 1)
		}},
		{"a name twice", func(b []byte) []byte { return append([]byte(`{"kind":"Twice",`), b[1:]...) }},
		{"a number for a string", func(b []byte) []byte { return append([]byte(`{"apiVersion":7,`), b[1:]...) }},
		{"invalid UTF-8", func(b []byte) []byte { return append([]byte("{\"apiVersion\":\"v\xff1\","), b[1:]...) }},
		{"null metadata", func(b []byte) []byte { return append([]byte(`{"metadata":null,`), b[1:]...) }},
	}
	checked := 0
	eachFilled(2000, 4, func(k *Kind, n int, o Object) {
		raw, err := json.Marshal(o)
		if err != nil {
			t.Fatalf("%s: encode: %v", k.Kind, err)
		}
		for _, v := range variants {
			data := v.edit(bytes.Clone(raw))
			want := k.New()
			wantDups, wantErr := sjson.UnmarshalStrict(data, want, sjson.DisallowDuplicateFields)
			got := k.New()
			gotDups, gotErr := unmarshalTyped(data, got)
			if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
				t.Fatalf("%s #%d, %s: error %v; UnmarshalStrict's %v", k.Kind, n, v.name, gotErr, wantErr)
			}
			if g, w := paths(gotDups), strictPaths(wantDups); !reflect.DeepEqual(g, w) {
				t.Fatalf("%s #%d, %s: duplicates %q; UnmarshalStrict's %q", k.Kind, n, v.name, g, w)
			}
			if wantErr == nil && !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				t.Fatalf("%s #%d, %s: decoded\n%s\nUnmarshalStrict's\n%s", k.Kind, n, v.name, g, w)
			}
			checked++
		}
	})
	if holdsInterface(reflect.TypeFor[Pod]()) || !holdsInterface(reflect.TypeFor[TraceSpan]()) {
		t.Error("holdsInterface: a Pod holds none, a TraceSpan's details do")
	}
	t.Logf("%d decodes compared", checked)
}

// TestDecodeCleanIsChecked: DecodeJSONWith, which decodes a clean request
// in one pass (DecodeClean), answers what the checked path (parsed, walked
// by checkStrict, decoded) answers, in every field validation mode: the same
// object, the same dropped fields, the same error, for every registered kind
// filled at random, and for the same JSON spoilt in the ways a student's
// file is. Only the unspoilt documents of k's own version take the clean path.
func TestDecodeCleanIsChecked(t *testing.T) {
	t.Parallel()
	prefix := func(p string) func([]byte) []byte {
		return func(b []byte) []byte { return append([]byte(p), b[1:]...) }
	}
	replace := func(old, new string) func([]byte) []byte {
		return func(b []byte) []byte { return bytes.Replace(b, []byte(old), []byte(new), 1) }
	}
	variants := []struct {
		name  string
		edit  func([]byte) []byte
		clean bool // the clean path takes it (when the edit found its place)
		drops bool // Warn and Ignore drop something: decoded in every mode
	}{
		{"as encoded", func(b []byte) []byte { return b }, true, true},
		{"indented", func(b []byte) []byte {
			var out bytes.Buffer
			_ = json.Indent(&out, b, "", "  ")
			return out.Bytes()
		}, true, false},
		{"an unknown field", prefix(`{"bogus":1,`), false, true},
		{"an unknown field in metadata", replace(`"metadata":{`, `"metadata":{"bogus":1,`), false, true},
		{"a field skiff does not support", replace(`"spec":{`, `"spec":{"hostPID":true,`), false, false},
		{"a name in another case", replace(`"metadata":`, `"Metadata":`), false, true},
		{"a name twice", prefix(`{"kind":"Twice",`), false, true},
		{"a number for a string", prefix(`{"apiVersion":7,`), false, false},
		{"another version", prefix(`{"apiVersion":"v0",`), false, false},
		{"not a time", replace(`"creationTimestamp":null`, `"creationTimestamp":"yesterday"`), false, false},
		{"data after it", func(b []byte) []byte { return append(b, []byte(` {}`)...) }, false, false},
		{"a list", func(b []byte) []byte { return append(append([]byte(`[`), b...), ']') }, false, false},
	}
	clean, checked := 0, 0
	eachFilled(3000, 2, func(k *Kind, n int, o Object) {
		if n%2 == 0 {
			*o.GetTypeMeta() = TypeMeta{APIVersion: k.APIVersion(), Kind: k.Kind}
		}
		raw, err := json.Marshal(o)
		if err != nil {
			t.Fatalf("%s: encode: %v", k.Kind, err)
		}
		for _, v := range variants {
			data := v.edit(bytes.Clone(raw))
			_, ok := DecodeClean(k, data)
			if ok {
				clean++
			}
			if ok && !v.clean && !bytes.Equal(data, raw) {
				t.Fatalf("%s #%d, %s: taken by the clean path:\n%s", k.Kind, n, v.name, data)
			}
			modes := []FieldValidation{FieldValidationStrict}
			if v.drops {
				modes = append(modes, FieldValidationWarn, FieldValidationIgnore)
			}
			for _, fv := range modes {
				got, gotDropped, gotErr := DecodeJSONWith(k, data, fv)
				want, wantDropped, wantErr := decodeJSONChecked(k, data, fv)
				if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
					t.Fatalf("%s #%d, %s, %s: error %v; checked %v", k.Kind, n, v.name, fv, gotErr, wantErr)
				}
				if !reflect.DeepEqual(gotDropped, wantDropped) {
					t.Fatalf("%s #%d, %s, %s: dropped %v; checked %v", k.Kind, n, v.name, fv, gotDropped, wantDropped)
				}
				if !reflect.DeepEqual(got, want) {
					g, _ := json.Marshal(got)
					w, _ := json.Marshal(want)
					t.Fatalf("%s #%d, %s, %s: decoded\n%s\nchecked\n%s", k.Kind, n, v.name, fv, g, w)
				}
				checked++
			}
		}
	})
	// Every kind without an interface value had a document of its own version.
	if min := len(Kinds) - 2; clean < min {
		t.Errorf("%d documents took the clean path, want at least %d", clean, min)
	}
	t.Logf("%d decodes compared, %d documents clean", checked, clean)
}

func paths(l FieldErrors) []string {
	var out []string
	for _, e := range l {
		out = append(out, e.Field)
	}
	return out
}
