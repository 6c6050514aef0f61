package api

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// fieldsV1Variants are managedFields' FieldsV1 as they come: skiff's own
// (compact ASCII), a client's with whitespace, one with characters
// encoding/json escapes for HTML, one with other Unicode, and none.
var fieldsV1Variants = []json.RawMessage{
	json.RawMessage(`{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"main\"}":{".":{},"f:image":{}}}}}`),
	json.RawMessage(`{"f:spec": {"f:replicas": {}}}`),
	json.RawMessage("{\"f:data\":{\"f:a\\u0026b\":{}},\n\"f:x\":{}}"),
	json.RawMessage(`{"f:metadata":{"f:annotations":{"f:a<b>&c":{}}}}`),
	json.RawMessage(`{"f:data":{"f:caf` + "\u00e9" + `":{},"f:` + "\u2028" + `":{}}}`),
	nil,
	json.RawMessage(`{}`),
	json.RawMessage(`[1,2.5e3,true,null,"s"]`),
}

// TestEncodeIsMarshal: for every registered kind, filled at random with
// managedFields of every sort, Encode gives what encoding/json's Marshal
// gives, and leaves the object as it was.
func TestEncodeIsMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	fast := 0
	eachFilled(2000, 40, func(k *Kind, n int, o Object) {
		m := o.GetObjectMeta()
		if n%4 != 0 { // the filler's own otherwise: random strings, seldom verbatim
			m.ManagedFields = make([]ManagedFieldsEntry, r.IntN(4))
			for j := range m.ManagedFields {
				m.ManagedFields[j] = ManagedFieldsEntry{Manager: "m", Operation: "Update",
					FieldsType: "FieldsV1", FieldsV1: fieldsV1Variants[r.IntN(len(fieldsV1Variants))]}
			}
			if n%3 == 0 {
				for j := range m.ManagedFields {
					m.ManagedFields[j].FieldsV1 = fieldsV1Variants[0]
				}
			}
		}
		before := Clone(o)
		want, wantErr := json.Marshal(o)
		got, err := Encode(o)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("%s #%d: Encode error %v, encoding/json error %v", k.Kind, n, err, wantErr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s #%d: Encode differs from encoding/json:\n got %s\nwant %s", k.Kind, n, got, want)
		}
		if !reflect.DeepEqual(o, before) {
			t.Fatalf("%s #%d: Encode changed the object", k.Kind, n)
		}
		// The splice is taken exactly where every FieldsV1 there is
		// is verbatim (for the variants: the filler's own, n%4 == 0,
		// may be either), and gives the same bytes.
		spliced, ok, err := encodeSpliced(o)
		if err != nil && wantErr == nil {
			t.Fatalf("%s #%d: encodeSpliced: %v", k.Kind, n, err)
		}
		if wantOK := spliceable(m.ManagedFields); n%4 != 0 && ok != wantOK {
			t.Fatalf("%s #%d: spliced %v, want %v, for managedFields %+v", k.Kind, n, ok, wantOK, m.ManagedFields)
		}
		if ok {
			if !bytes.Equal(spliced, want) {
				t.Fatalf("%s #%d: the splice differs from encoding/json:\n got %s\nwant %s", k.Kind, n, spliced, want)
			}
			fast++
		}
	})
	if fast < len(Kinds) {
		t.Fatalf("only %d objects had managedFields Encode writes itself", fast)
	}
}

// spliceable: managedFields of fieldsV1Variants with a FieldsV1, every
// one of them compact ASCII without <, > or & (variants 0, 6 and 7).
func spliceable(entries []ManagedFieldsEntry) bool {
	n := 0
	for _, e := range entries {
		switch {
		case len(e.FieldsV1) == 0:
		case bytes.Equal(e.FieldsV1, fieldsV1Variants[0]) || bytes.Equal(e.FieldsV1, fieldsV1Variants[6]) || bytes.Equal(e.FieldsV1, fieldsV1Variants[7]):
			n++
		default:
			return false
		}
	}
	return n > 0
}

// TestEncodeMetadataFirst: Encode finds the managedFields' stand-ins as
// the first `"fieldsV1":` keys of an object's JSON, which holds because
// every kind encodes its metadata before any field that could hold
// arbitrary JSON objects (a custom resource's spec may have a fieldsV1).
func TestEncodeMetadataFirst(t *testing.T) {
	for _, k := range Kinds {
		ty := reflect.TypeOf(k.New()).Elem()
		for i := range ty.NumField() {
			f := ty.Field(i)
			if f.Type == reflect.TypeFor[ObjectMeta]() {
				break
			}
			if f.Type != reflect.TypeFor[TypeMeta]() && f.Type.Kind() != reflect.String {
				t.Errorf("%s: field %s (%s) comes before the metadata", k.Kind, f.Name, f.Type)
			}
			if i == ty.NumField()-1 {
				t.Errorf("%s: no ObjectMeta field", k.Kind)
			}
		}
	}
	// and in ObjectMeta, nothing before managedFields holds JSON objects of
	// arbitrary keys: labels and annotations are strings, the rest typed
	mt := reflect.TypeFor[ObjectMeta]()
	for i := range mt.NumField() {
		f := mt.Field(i)
		if f.Name == "ManagedFields" {
			break
		}
		if strings.Contains(f.Type.String(), "interface") || strings.Contains(f.Type.String(), "RawMessage") {
			t.Errorf("ObjectMeta.%s (%s) comes before managedFields", f.Name, f.Type)
		}
	}
}

// BenchmarkEncodePod: a created pod as the store writes it, with
// encoding/json and with Encode.
func BenchmarkEncodePod(b *testing.B) {
	k := podKindForTest(b)
	raw := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p-1-2","namespace":"default","uid":"af045f62-95a9-4c55-b1ae-881e60daf7ac","resourceVersion":"68","generation":1,"creationTimestamp":"2026-12-05T12:57:19Z","labels":{"app":"bench"},"managedFields":[{"manager":"Go-http-client","operation":"Update","apiVersion":"v1","time":"2026-12-05T12:57:19Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"main\"}":{".":{},"f:command":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:serviceAccount":{},"f:serviceAccountName":{},"f:terminationGracePeriodSeconds":{}},"f:status":{"f:phase":{}}}}]},"spec":{"containers":[{"name":"main","image":"busybox:1.36","imagePullPolicy":"IfNotPresent","command":["sleep","3600"],"resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"schedulerName":"default-scheduler","priority":0,"preemptionPolicy":"PreemptLowerPriority","serviceAccountName":"default","serviceAccount":"default","enableServiceLinks":true,"dnsPolicy":"ClusterFirst","securityContext":{}},"status":{"phase":"Pending"}}`)
	o, err := DecodeStored(k, raw)
	if err != nil {
		b.Fatal(err)
	}
	if got, err := Encode(o); err != nil || !bytes.Equal(got, raw) {
		b.Fatalf("the benchmark's pod encodes differently: %v\n%s", err, got)
	}
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(o); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Encode(o); err != nil {
				b.Fatal(err)
			}
		}
	})
}
