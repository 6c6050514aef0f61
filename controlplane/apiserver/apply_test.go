package apiserver

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/randfill"

	"skiff.dev/skiff/api"
)

// managedFieldsByJSON is how setManagedFields read a typed object's
// managedFields before it copied them field by field: a JSON round trip.
func managedFieldsByJSON(mf []metav1.ManagedFieldsEntry) ([]api.ManagedFieldsEntry, error) {
	var entries []api.ManagedFieldsEntry
	if len(mf) > 0 {
		b, err := json.Marshal(mf)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &entries); err != nil {
			return nil, err
		}
	}
	return entries, nil
}

// TestSetManagedFieldsIsTheJSONRoundTrip: for random managedFields (times
// with nanoseconds and zones, fields JSON with spaces, empty and missing
// parts), setManagedFields gives what the JSON round trip gave, to the
// byte once encoded, and fails where it failed.
func TestSetManagedFieldsIsTheJSONRoundTrip(t *testing.T) {
	zones := []*time.Location{time.UTC, time.FixedZone("x", 5*3600+1800), time.FixedZone("y", -7*3600)}
	f := randfill.NewWithSeed(26).NilChance(0.2).NumElements(0, 4).Funcs(
		func(tm *metav1.Time, c randfill.Continue) {
			switch c.Intn(3) {
			case 0: // zero
			case 1:
				*tm = metav1.NewTime(time.Unix(c.Int63n(1<<33), 0).In(zones[c.Intn(len(zones))]))
			default:
				*tm = metav1.NewTime(time.Unix(c.Int63n(1<<33), c.Int63n(1e9)).In(zones[c.Intn(len(zones))]))
			}
		},
		func(fv *metav1.FieldsV1, c randfill.Continue) {
			key := c.String(6)
			raws := []string{
				`{}`,
				fmt.Sprintf(`{"f:metadata":{"f:labels":{".":{},"f:%s":{}}}}`, key),
				`{"f:metadata":{"f:annotations":{"f:a<b&c>d\u2028":{}}}}`,
				fmt.Sprintf("{ \"f:spec\" : {\n  \"f:containers\": {\"k:{\\\"name\\\":%q}\": {\".\":{} }}}}", key),
				`not json`,
			}
			if c.Intn(20) > 0 {
				raws = raws[:4] // invalid JSON now and then
			}
			fv.SetRawBytes([]byte(raws[c.Intn(len(raws))]))
		},
	)
	errs := 0
	for i := range 2000 {
		var mf []metav1.ManagedFieldsEntry
		f.Fill(&mf)
		want, wantErr := managedFieldsByJSON(mf)
		pod := &corev1.Pod{}
		pod.SetManagedFields(mf)
		got := &api.Pod{ObjectMeta: api.ObjectMeta{ManagedFields: []api.ManagedFieldsEntry{{Manager: "before"}}}}
		gotErr := setManagedFields(got, pod)
		if (wantErr != nil) != (gotErr != nil) {
			t.Fatalf("case %d: error %v, the round trip's %v (%+v)", i, gotErr, wantErr, mf)
		}
		if wantErr != nil {
			errs++
			if got.ManagedFields[0].Manager != "before" || len(got.ManagedFields) != 1 {
				t.Fatalf("case %d: a failed copy changed the object's managedFields: %+v", i, got.ManagedFields)
			}
			continue
		}
		wb, _ := json.Marshal(want)
		gb, _ := json.Marshal(got.ManagedFields)
		if string(wb) != string(gb) || !reflect.DeepEqual(want, got.ManagedFields) {
			t.Fatalf("case %d:\n got %s\nwant %s", i, gb, wb)
		}
	}
	if errs == 0 {
		t.Fatal("no case with fields that are not JSON")
	}
}
