package api

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

// FuzzDecodeKind decodes any JSON strictly as each registered kind (a kind
// added to Kinds is fuzzed from then on): it fails with a *DecodeError or
// gives an object of that kind that is stable through encode → decode;
// defaulting and validation never panic.
func FuzzDecodeKind(f *testing.F) {
	for i, k := range Kinds {
		b, err := json.Marshal(k.New())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), b)
	}
	files, _ := filepath.Glob("testdata/valid-*.yaml")
	examples, _ := filepath.Glob("../examples/*.yaml")
	for _, p := range append(files, examples...) {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		for _, d := range DecodeStream(data) {
			if d.Err != nil {
				continue
			}
			b, err := json.Marshal(d.Object)
			if err != nil {
				f.Fatal(err)
			}
			for i, k := range Kinds {
				if k == d.Kind {
					f.Add(uint8(i), b)
				}
			}
		}
	}
	f.Add(uint8(3), []byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i","env":[{"name":"A","valueFrom":{"resourceFieldRef":{"resource":"limits.memory","divisor":"1000E"}}}]}]}}`))
	f.Add(uint8(3), []byte(`{"metadata":{"name":"p"},"spec":{"volumes":[{"name":"v","emptyDir":{"sizeLimit":"1e21"}}]}}`))
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		if len(data) > 64<<10 {
			t.Skip("input too large")
		}
		k := Kinds[int(which)%len(Kinds)]
		o, err := DecodeJSON(k, data)
		if err != nil {
			if _, ok := err.(*DecodeError); !ok {
				t.Fatalf("%s: error %T, not a *DecodeError: %v", k.Kind, err, err)
			}
			return
		}
		if got := MustKindOf(o); got != k {
			t.Fatalf("decoded as %s, got a %s", k.Kind, got.Kind)
		}
		valid := Validate(o) == nil
		roundTrip(t, k, o, valid)
		SetDefaults(o)
		_ = ValidateUpdate(o, Clone(o))
		if _, err := yaml.Marshal(o); err != nil {
			t.Fatalf("%s: encode as YAML: %v", k.Kind, err)
		}
	})
}
