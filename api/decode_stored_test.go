package api

import (
	"encoding/json"
	"reflect"
	"testing"

	sjson "sigs.k8s.io/json"
)

// TestDecodeStoredIsUnmarshal: for every registered kind, filled at random
// and encoded as the store encodes, DecodeStored gives what encoding/json's
// Unmarshal gives, and keeps nothing of the input's memory (the store decodes
// from bbolt's pages, valid only inside their transaction).
func TestDecodeStoredIsUnmarshal(t *testing.T) {
	eachFilled(1000, 40, func(k *Kind, n int, o Object) {
		raw, err := json.Marshal(o)
		if err != nil {
			t.Fatalf("%s: encode: %v", k.Kind, err)
		}
		want := k.New()
		if err := json.Unmarshal(raw, want); err != nil {
			t.Fatalf("%s #%d: encoding/json: %v", k.Kind, n, err)
		}
		buf := append([]byte(nil), raw...)
		got, err := DecodeStored(k, buf)
		if err != nil {
			t.Fatalf("%s #%d: DecodeStored: %v\n%s", k.Kind, n, err, raw)
		}
		meta, err := DecodeStoredMeta(k, buf)
		if err != nil {
			t.Fatalf("%s #%d: DecodeStoredMeta: %v\n%s", k.Kind, n, err, raw)
		}
		for j := range buf {
			buf[j] = 'x' // as bbolt reuses a page after its transaction
		}
		wantMeta := k.New()
		*wantMeta.GetTypeMeta(), *wantMeta.GetObjectMeta() = *want.GetTypeMeta(), *want.GetObjectMeta()
		if !reflect.DeepEqual(meta, wantMeta) {
			g, _ := json.Marshal(meta)
			t.Fatalf("%s #%d: DecodeStoredMeta is not the metadata alone:\n got %s\nfrom %s", k.Kind, n, g, raw)
		}
		if !reflect.DeepEqual(got, want) {
			g, _ := json.Marshal(got)
			t.Fatalf("%s #%d: DecodeStored differs from encoding/json:\n got %s\nwant %s", k.Kind, n, g, raw)
		}
	})
}

// TestDecodeStoredErrors: bytes that are not an object of the kind are an
// error, as they are for encoding/json.
func TestDecodeStoredErrors(t *testing.T) {
	for _, raw := range []string{``, `{`, `[]`, `{"metadata":{"name":3}}`, `{"spec":{"containers":{}}}`, `"pod"`} {
		var p Pod
		stdErr := json.Unmarshal([]byte(raw), &p)
		_, err := DecodeStored(podKindForTest(t), []byte(raw))
		if (err == nil) != (stdErr == nil) {
			t.Errorf("%q: DecodeStored error %v, encoding/json error %v", raw, err, stdErr)
		}
		if err == nil {
			t.Errorf("%q: DecodeStored accepted it", raw)
		}
	}
}

func podKindForTest(t testing.TB) *Kind {
	t.Helper()
	k, err := LookupKind("v1", "Pod")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// BenchmarkDecodePod: a Deployment's running pod as the store holds it.
func BenchmarkDecodePod(b *testing.B) {
	k := podKindForTest(b)
	raw := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-7c9f5d8b6-abcde","generateName":"web-7c9f5d8b6-","namespace":"default","uid":"0b8c9a4e-1f2d-4c3b-9a8e-7d6c5b4a3f21","resourceVersion":"12345","creationTimestamp":"2026-12-02T11:00:00Z","labels":{"app":"web","pod-template-hash":"7c9f5d8b6"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7c9f5d8b6","uid":"1b8c9a4e-1f2d-4c3b-9a8e-7d6c5b4a3f21","controller":true,"blockOwnerDeletion":true}],"managedFields":[{"manager":"kube-controller-manager","operation":"Update","apiVersion":"v1","time":"2026-12-02T11:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{},"f:ports":{}}}}}}]},"spec":{"containers":[{"name":"web","image":"nginx:1.27","ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{"requests":{"cpu":"100m","memory":"128Mi"},"limits":{"memory":"256Mi"}},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","serviceAccountName":"default","nodeName":"node-1","schedulerName":"default-scheduler","priority":0,"enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority","tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}]},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-12-02T11:00:01Z"}],"hostIP":"10.0.0.1","podIP":"10.244.1.5","startTime":"2026-12-02T11:00:00Z","containerStatuses":[{"name":"web","ready":true,"restartCount":0,"image":"nginx:1.27","imageID":"sha256:abc","containerID":"containerd://abc","started":true,"state":{"running":{"startedAt":"2026-12-02T11:00:01Z"}}}],"qosClass":"Burstable"}}`)
	std, err := DecodeStored(k, raw)
	if err != nil {
		b.Fatal(err)
	}
	if want := k.New(); json.Unmarshal(raw, want) != nil || !reflect.DeepEqual(std, want) {
		b.Fatal("the benchmark's pod decodes differently")
	}
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := json.Unmarshal(raw, k.New()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DecodeStored", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeStored(k, raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Clone", func(b *testing.B) { // what a copy of the decoded pod costs instead
		b.ReportAllocs()
		for b.Loop() {
			_ = Clone(std)
		}
	})
	b.Run("DecodeStoredMeta", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeStoredMeta(k, raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	// A request's typed decode (strict.go): sigs.k8s.io/json alone, as
	// before, and unmarshalTyped (go-json-experiment, it as the fallback).
	b.Run("UnmarshalStrict", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := sjson.UnmarshalStrict(raw, k.New(), sjson.DisallowDuplicateFields); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unmarshalTyped", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := unmarshalTyped(raw, k.New()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DecodeJSON-checked", func(b *testing.B) { // as before DecodeClean
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := decodeJSONChecked(k, raw, FieldValidationStrict); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DecodeJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeJSON(k, raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}
