package store

import (
	"encoding/json"
	"fmt"
	"testing"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/randobj"
)

// unmarshalMeta is what readStoredMeta replaces: encoding/json's decode of
// the whole object into the three fields.
func unmarshalMeta(raw []byte) (storedMeta, error) {
	var into struct {
		Metadata struct {
			UID               string   `json:"uid"`
			ResourceVersion   string   `json:"resourceVersion"`
			CreationTimestamp api.Time `json:"creationTimestamp"`
		} `json:"metadata"`
	}
	err := json.Unmarshal(raw, &into)
	m := into.Metadata
	return storedMeta{UID: m.UID, ResourceVersion: m.ResourceVersion, CreationTimestamp: m.CreationTimestamp}, err
}

// TestReadStoredMetaIsUnmarshal: for every kind filled at random (empty and
// missing metadata fields included), the committer's early-stopping read
// gives what decoding the whole stored object gave.
func TestReadStoredMetaIsUnmarshal(t *testing.T) {
	f := randobj.Filler(7, randobj.Options{NilChance: 0.2, MaxDepth: 8})
	checked := 0
	for _, k := range api.Kinds {
		for i := range 20 {
			o := k.New()
			f.Fill(o)
			*o.GetTypeMeta() = api.TypeMeta{APIVersion: k.APIVersion(), Kind: k.Kind}
			m := o.GetObjectMeta()
			switch i % 4 {
			case 0:
				m.UID, m.ResourceVersion = "", ""
			case 1:
				m.CreationTimestamp = api.Time{}
			case 2:
				m.ResourceVersion = fmt.Sprint(i + 1)
			}
			raw, err := json.Marshal(o)
			if err != nil {
				continue // randfill made a value JSON cannot carry
			}
			want, err := unmarshalMeta(raw)
			if err != nil {
				t.Fatalf("%s: %v", k.Kind, err)
			}
			got, err := readStoredMeta(raw)
			if err != nil {
				t.Fatalf("%s %d: readStoredMeta: %v\n%s", k.Kind, i, err, raw)
			}
			if got.UID != want.UID || got.ResourceVersion != want.ResourceVersion || !got.CreationTimestamp.Equal(want.CreationTimestamp.Time) {
				t.Fatalf("%s %d: readStoredMeta = %+v, encoding/json %+v\n%s", k.Kind, i, got, want, raw)
			}
			checked++
		}
	}
	if checked < len(api.Kinds)*10 {
		t.Fatalf("only %d objects checked", checked)
	}
	for _, raw := range []string{`{}`, `{"metadata":{}}`, `{"kind":"Pod","metadata":{"uid":"u","creationTimestamp":null}}`, `{"metadata":{"labels":{"uid":"x"},"resourceVersion":"5"}}`} {
		want, _ := unmarshalMeta([]byte(raw))
		got, err := readStoredMeta([]byte(raw))
		if err != nil || got != want {
			t.Errorf("readStoredMeta(%s) = %+v, %v; encoding/json %+v", raw, got, err, want)
		}
	}
	for _, raw := range []string{``, `[]`, `{"metadata":[]}`, `{"metadata":{"uid":5}}`, `{"metadata":{"uid":"u"`} {
		if _, err := readStoredMeta([]byte(raw)); err == nil {
			t.Errorf("readStoredMeta(%q): no error", raw)
		}
	}
}

// BenchmarkReadStoredMeta: what the committer reads of each object it
// updates, against encoding/json's decode of the whole object.
func BenchmarkReadStoredMeta(b *testing.B) {
	o := api.Pod{ObjectMeta: api.ObjectMeta{Name: "web-1", Namespace: "default", UID: "0b8c9a4e-1f2d-4c3b-9a8e-7d6c5b4a3f21", ResourceVersion: "12345",
		CreationTimestamp: api.NewTime(api.Now().Time), Labels: map[string]string{"app": "web", "pod-template-hash": "7c9f5d8b6"}},
		Spec: api.PodSpec{Containers: []api.Container{{Name: "web", Image: "nginx:1.27"}}}}
	api.SetDefaults(&o)
	raw, err := json.Marshal(&o)
	if err != nil {
		b.Fatal(err)
	}
	for name, read := range map[string]func([]byte) (storedMeta, error){"readStoredMeta": readStoredMeta, "encoding-json": unmarshalMeta} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := read(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
