package patch

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/randfill"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/randobj"
)

// roundTrip is what ToKubernetes did before api.ConvertJSON: encode the
// skiff object, decode the JSON into the Kubernetes struct.
func roundTrip(obj any, t reflect.Type) (any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	out := reflect.New(t).Interface()
	if err := json.Unmarshal(b, out); err != nil {
		return nil, err
	}
	return out, nil
}

// convertFiller fills skiff objects at random as they can be in memory:
// times with nanoseconds and zones, strings with bytes that are not UTF-8,
// empty but non-nil lists and maps, pointers to zero values.
func convertFiller(seed int64) *randfill.Filler {
	return randobj.Filler(seed, randobj.Options{
		NilChance: 0.25, MaxDepth: 14, RawSpaced: true,
		Zones: []*time.Location{time.UTC, time.FixedZone("x", 5*3600+1800)},
		Funcs: []any{func(s *string, c randfill.Continue) {
			switch c.Intn(12) {
			case 0:
				*s = ""
			case 1:
				*s = "a\xffb\xfe\xfd<&>\u2028" // not UTF-8: each bad byte becomes U+FFFD
			case 2:
				*s = fmt.Sprint(c.Intn(1000))
			default:
				*s = c.String(10)
			}
		}},
	})
}

// TestConvertJSONIsTheRoundTrip: for every kind with a Kubernetes type
// (client-go's scheme: what managedFields converts to; the table above:
// what ToKubernetes converts to), filled at random, api.ConvertJSON gives
// what the JSON round trip gave, and fails where it failed.
func TestConvertJSONIsTheRoundTrip(t *testing.T) {
	ok, kinds := 0, 0
	for i, k := range api.Kinds {
		gvk := schema.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}
		var kt reflect.Type
		if o, err := kscheme.Scheme.New(gvk); err == nil {
			kt = reflect.TypeOf(o).Elem()
		}
		if st, has := KubernetesType(k.APIVersion(), k.Kind); has {
			if kt != nil && kt != st {
				t.Fatalf("%s: client-go's type %s, the table's %s", k.Kind, kt, st)
			}
			kt = st
		}
		if kt == nil {
			continue
		}
		kinds++
		f := convertFiller(int64(i))
		for n := range 60 {
			o := k.New()
			f.Fill(o)
			want, wantErr := roundTrip(o, kt)
			got := reflect.New(kt).Interface()
			gotErr := api.ConvertJSON(got, o)
			if (wantErr != nil) != (gotErr != nil) {
				t.Fatalf("%s #%d: error %v, the round trip's %v", k.Kind, n, gotErr, wantErr)
			}
			if wantErr != nil {
				continue
			}
			ok++
			wb, _ := json.Marshal(want)
			gb, _ := json.Marshal(got)
			if string(wb) != string(gb) {
				t.Fatalf("%s #%d:\n got %s\nwant %s", k.Kind, n, gb, wb)
			}
			if !reflect.DeepEqual(want, got) {
				t.Fatalf("%s #%d: equal JSON, different values:\n got %#v\nwant %#v", k.Kind, n, got, want)
			}
		}
	}
	if kinds < 30 || ok < 500 {
		t.Fatalf("%d kinds, %d objects converted without an error: the comparison says little", kinds, ok)
	}
}

// TestToKubernetesConverts: ToKubernetes is api.ConvertJSON into the
// table's type.
func TestToKubernetesConverts(t *testing.T) {
	p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: "web", CreationTimestamp: api.NewTime(time.Unix(100, 5))}}
	p.Spec.Containers = []api.Container{{Name: "c", Image: "nginx"}}
	got, err := ToKubernetes("v1", "Pod", p)
	if err != nil {
		t.Fatal(err)
	}
	want, err := roundTrip(p, reflect.TypeFor[corev1.Pod]())
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ToKubernetes: %#v, %v; want %#v", got, err, want)
	}
}

// TestConvertJSONEdges: what encoding/json does at the edges, by hand.
func TestConvertJSONEdges(t *testing.T) {
	type inner struct {
		A string `json:"a,omitempty"`
	}
	type src struct {
		Name    string            `json:"name"`
		Empty   []string          `json:"empty"`
		Nil     []string          `json:"nil"`
		Map     map[string]string `json:"map"`
		Ptr     *inner            `json:"ptr"`
		Zero    *int32            `json:"zero,omitempty"`
		Bytes   []byte            `json:"bytes"`
		Case    string            `json:"CASE"`
		Dropped float64           `json:"dropped"`
		Time    *api.Time         `json:"time"`
		Null    api.Time          `json:"null"`
		Slice   *[]string         `json:"slice"`
	}
	type dst struct {
		Name  string            `json:"name"`
		Empty []string          `json:"empty"`
		Nil   []string          `json:"nil"`
		Map   map[string]string `json:"map"`
		Ptr   *inner            `json:"ptr"`
		Zero  *int64            `json:"zero"`
		Bytes []byte            `json:"bytes"`
		Case  string            `json:"case"`
		Time  *api.Time         `json:"time"`
		Null  *api.Time         `json:"null"`
		Slice []string          `json:"slice"`
	}
	zero := int32(0)
	var nilSlice []string
	cases := []src{
		{},
		{Name: "a\xffb", Empty: []string{}, Map: map[string]string{}, Ptr: &inner{}, Zero: &zero, Bytes: []byte{}, Case: "x", Time: &api.Time{}, Slice: &nilSlice},
		{Name: "<&>", Map: map[string]string{"k\xff": "v"}, Bytes: []byte("hi"), Time: &api.Time{Time: time.Unix(5, 7)}, Null: api.Time{Time: time.Unix(9, 0)}},
		{Dropped: 1.5},
	}
	for i, c := range cases {
		want, wantErr := roundTrip(&c, reflect.TypeFor[dst]())
		var got dst
		gotErr := api.ConvertJSON(&got, &c)
		if (wantErr != nil) != (gotErr != nil) {
			t.Fatalf("case %d: error %v, the round trip's %v", i, gotErr, wantErr)
		}
		if wantErr == nil && !reflect.DeepEqual(want, &got) {
			t.Fatalf("case %d:\n got %#v\nwant %#v", i, got, want)
		}
	}
	// NaN fails the round trip's encoding, even in a field dst lacks.
	var got dst
	bad := src{Dropped: nan()}
	if err := api.ConvertJSON(&got, &bad); err == nil || !strings.Contains(err.Error(), "NaN") {
		t.Fatalf("NaN in a dropped field: %v, want the round trip's error", err)
	}
}

func nan() float64 { z := 0.0; return z / z }
