package client

import (
	"strings"
	"testing"

	"skiff.dev/skiff/api"
)

// What the server answers is decoded leniently, as client-go does: a field
// of a newer server is ignored, keys are case-sensitive, a wrong type or
// another kind is still an error.
func TestDecodeObjectFromServer(t *testing.T) {
	kind := api.MustKindOf(&api.Deployment{})
	for _, tc := range []struct {
		name, raw string
		replicas  int32 // want, with no error; -1: nil
		err       string
	}{
		{"known fields", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":3}}`, 3, ""},
		{"no apiVersion in a list item", `{"metadata":{"name":"web"},"spec":{"replicas":2}}`, 2, ""},
		{"a newer server's fields", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","newMeta":1},"spec":{"replicas":3,"newSpec":{"a":[1]}},"newTop":true}`, 3, ""},
		{"keys are case-sensitive", `{"metadata":{"name":"web"},"Spec":{"replicas":4}}`, -1, ""},
		{"a wrong type", `{"metadata":{"name":"web"},"spec":{"replicas":"three"}}`, 0, "cannot unmarshal"},
		{"another kind", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"}}`, 0, "not apps/v1 Deployment"},
		{"not JSON", `{"metadata":`, 0, "unexpected end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := decodeObject(kind, []byte(tc.raw))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			d := o.(*api.Deployment)
			if d.Name != "web" || d.APIVersion != "apps/v1" || d.Kind != "Deployment" {
				t.Errorf("decoded %s %s %q", d.APIVersion, d.Kind, d.Name)
			}
			switch {
			case tc.replicas < 0 && d.Spec.Replicas != nil:
				t.Errorf("replicas %d, want none (Spec is not spec)", *d.Spec.Replicas)
			case tc.replicas >= 0 && (d.Spec.Replicas == nil || *d.Spec.Replicas != tc.replicas):
				t.Errorf("replicas %v, want %d", d.Spec.Replicas, tc.replicas)
			}
		})
	}
}
