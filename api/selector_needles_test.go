package api

import (
	"bytes"
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/fields"
)

// Every object a field selector of one of its string fields selects holds
// the selector's needles in its JSON, as encoding/json writes it: a store
// that skips objects without them skips none that match. Random values
// (unicode, quotes, <, &) are escaped alike in both.
func TestFieldNeedlesAreInTheJSONOfWhatMatches(t *testing.T) {
	f := filler(11)
	needles := 0
	for _, obj := range []Object{&Pod{}, &Event{}, &Node{}, &Secret{}, &ResourceSlice{}, &ConfigMap{}} {
		k := MustKindOf(obj)
		for range 200 {
			o := filled(t, f, k)
			raw, err := json.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			set := FieldsOf(o)
			for _, field := range append(append([]string(nil), SupportedFieldSelectors[""]...), SupportedFieldSelectors[k.Kind]...) {
				value, ok := set[field]
				if !ok {
					continue
				}
				sel := fields.OneTermEqualSelector(field, value)
				if !Matches(o, nil, sel) {
					t.Fatalf("%s: %s=%q does not match the object it was read from", k.Kind, field, value)
				}
				for _, n := range FieldNeedles(sel) {
					needles++
					if !bytes.Contains(raw, n) {
						t.Fatalf("%s: %s=%q matches, but its JSON lacks %s:\n%s", k.Kind, field, value, n, raw)
					}
				}
			}
		}
	}
	// Most random values are not empty: most fields gave a needle.
	if needles < 2000 {
		t.Errorf("only %d needles checked", needles)
	}
}

// What no needle can stand for gives none.
func TestFieldNeedlesOnlyForEqualStrings(t *testing.T) {
	for sel, want := range map[string]string{
		"spec.nodeName=node-1":                     `"nodeName":"node-1"`,
		"spec.nodeName==a<b":                       `"nodeName":"a\u003cb"`,
		"spec.driver=gpu.skiff.dev,metadata.name=": `"driver":"gpu.skiff.dev"`,
		"spec.nodeName!=node-1":                    "",
		"spec.nodeName=":                           "",
		"spec.unschedulable=true":                  "",
		"source=kubelet":                           `"component":"kubelet"`,
	} {
		fs, err := fields.ParseSelector(sel)
		if err != nil {
			t.Fatal(err)
		}
		got := bytes.Join(FieldNeedles(fs), []byte(" "))
		if string(got) != want {
			t.Errorf("FieldNeedles(%q) = %s, want %s", sel, got, want)
		}
	}
	if FieldNeedles(nil) != nil {
		t.Error("FieldNeedles(nil) gave needles")
	}
}
