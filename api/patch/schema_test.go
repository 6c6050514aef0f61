package patch

import (
	"reflect"
	"strings"
	"testing"

	"skiff.dev/skiff/api"
)

// Every kind users write has strategic merge metadata; skiff's own do not.
func TestEveryKindHasSchema(t *testing.T) {
	for _, k := range api.Kinds {
		t.Run(k.Kind, func(t *testing.T) {
			_, err := Schema(k.APIVersion(), k.Kind)
			if k.Internal || k.CustomResource {
				if err == nil {
					t.Errorf("internal kind %s has a Kubernetes schema", k.Kind)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The strategic merge metadata is looked up by JSON field name in the
// Kubernetes struct: every map, list or struct field of a skiff type must
// have its namesake there, or patches of it would fail.
func TestSkiffFieldsExistInKubernetesStructs(t *testing.T) {
	for _, k := range api.Kinds {
		if k.Internal || k.CustomResource {
			continue
		}
		t.Run(k.Kind, func(t *testing.T) {
			s := schemas[schemaKey(k.APIVersion(), k.Kind)]
			var missing []string
			compareFields(k.Type, reflect.TypeOf(s).Elem(), k.Kind, &missing, map[reflect.Type]bool{})
			if len(missing) > 0 {
				t.Errorf("fields without a Kubernetes namesake:\n%s", strings.Join(missing, "\n"))
			}
		})
	}
	t.Run("Scale", func(t *testing.T) {
		var missing []string
		compareFields(reflect.TypeFor[api.Scale](), reflect.TypeOf(schemas["autoscaling/v1, Kind=Scale"]).Elem(), "Scale", &missing, map[reflect.Type]bool{})
		if len(missing) > 0 {
			t.Errorf("fields without a Kubernetes namesake:\n%s", strings.Join(missing, "\n"))
		}
	})
}

func compareFields(ours, theirs reflect.Type, path string, missing *[]string, seen map[reflect.Type]bool) {
	ours, theirs = deref(ours), deref(theirs)
	if ours.Kind() != reflect.Struct || theirs.Kind() != reflect.Struct || seen[ours] {
		return
	}
	seen[ours] = true
	defer delete(seen, ours)
	tf := jsonFields(theirs)
	for name, f := range jsonFields(ours) {
		ft := deref(f.Type)
		switch ft.Kind() {
		case reflect.Struct, reflect.Slice, reflect.Map:
		default:
			continue // scalars need no metadata
		}
		if ft.PkgPath() != "" && ft.Kind() == reflect.Struct && ft.NumField() > 0 && !ft.Field(0).IsExported() {
			continue // leaf types (Quantity, Time) marshal as scalars
		}
		g, ok := tf[name]
		if !ok {
			*missing = append(*missing, path+"."+name)
			continue
		}
		a, b := ft, deref(g.Type)
		for a.Kind() == reflect.Slice || a.Kind() == reflect.Map {
			a = deref(a.Elem())
			if b.Kind() == reflect.Slice || b.Kind() == reflect.Map {
				b = deref(b.Elem())
			}
		}
		compareFields(a, b, path+"."+name, missing, seen)
	}
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// jsonFields maps JSON names to fields, inlined embedded structs included.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if f.Anonymous && name == "" && deref(f.Type).Kind() == reflect.Struct {
			for n, sf := range jsonFields(deref(f.Type)) {
				out[n] = sf
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f
	}
	return out
}
