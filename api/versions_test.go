package api

import (
	"encoding/json"
	"reflect"
	"testing"
)

// testVersionedKind is ConfigMap stored at v1 and served at "v0", where
// data was called contents: the shape of a rename between versions.
func testVersionedKind() *Kind {
	return &Kind{Kind: "ConfigMap", Version: "v1", Resource: "configmaps", Namespaced: true, Type: reflect.TypeFor[ConfigMap](),
		Served: []ServedVersion{{Version: "v0", Warning: "v0 is deprecated",
			ToStored:   func(m map[string]any) error { RenameField(m, "contents", "data"); return nil },
			FromStored: func(m map[string]any) error { RenameField(m, "data", "contents"); return nil }}}}
}

func TestServedVersionDecode(t *testing.T) {
	k := testVersionedKind()
	tests := []struct {
		name    string
		in      string
		want    map[string]string
		wantErr bool
	}{
		{"stored version", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}`, map[string]string{"k": "v"}, false},
		{"served version converted", `{"apiVersion":"v0","kind":"ConfigMap","metadata":{"name":"a"},"contents":{"k":"v"}}`, map[string]string{"k": "v"}, false},
		{"served name at stored version refused", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"contents":{"k":"v"}}`, nil, true},
		{"unserved version refused", `{"apiVersion":"v2","kind":"ConfigMap","metadata":{"name":"a"}}`, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := DecodeJSON(k, []byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("DecodeJSON: err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			cm := o.(*ConfigMap)
			if cm.APIVersion != "v1" || !reflect.DeepEqual(cm.Data, tt.want) {
				t.Errorf("decoded %s data %v, want v1 data %v", cm.APIVersion, cm.Data, tt.want)
			}
		})
	}
}

func TestServedVersionRoundTrip(t *testing.T) {
	k := testVersionedKind()
	sv, ok := k.ServedAt("v0")
	if !ok || sv == nil {
		t.Fatalf("ServedAt(v0) = %v, %v", sv, ok)
	}
	if s, ok := k.ServedAt("v1"); !ok || s != nil {
		t.Fatalf("ServedAt(v1) = %v, %v; want nil, true (stored)", s, ok)
	}
	if _, ok := k.ServedAt("v9"); ok {
		t.Fatal("ServedAt(v9) served")
	}
	stored := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}`)
	old, err := k.ConvertFromStored(sv, stored)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(old, &m); err != nil {
		t.Fatal(err)
	}
	if m["apiVersion"] != "v0" || m["data"] != nil || m["contents"] == nil {
		t.Fatalf("from stored: %s", old)
	}
	back, err := k.ConvertToStored(sv, old)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	_ = json.Unmarshal(stored, &a)
	_ = json.Unmarshal(back, &b)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("round trip: %s, want %s", back, stored)
	}
}
