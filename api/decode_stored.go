package api

import (
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// DecodeStored decodes JSON that skiff encoded itself (the store's values
// and its watch events) into a new object of kind k. Nothing is checked:
// the bytes were an object of k when they were written (a request's JSON
// goes through DecodeJSON, which refuses what skiff does not support).
//
// The result is exactly encoding/json's Unmarshal's (TestDecodeStoredIsUnmarshal);
// it decodes with go-json-experiment's implementation of encoding/json's v1
// semantics (the code behind Go's encoding/json/v2 experiment), which takes
// about half the time and allocations for a pod. Every watch event and
// every Get of the store pays this decode, so it is a large share of what a
// pod costs the control plane (docs/performance.md, fourth sitting).
func DecodeStored(k *Kind, data []byte) (Object, error) {
	o := k.New()
	if err := jsonv1.Unmarshal(data, o); err != nil {
		return nil, err
	}
	return o, nil
}

// DecodeStoredMeta is DecodeStored for a reader that needs only the
// object's identity: a new object of kind k with its type and metadata
// decoded from data and every other field left zero. The rest of data is
// scanned, not decoded (no allocations for it): for a pod about half of
// DecodeStored's time and a third of its allocations (BenchmarkDecodePod;
// the metadata's managedFields are most of the rest).
func DecodeStoredMeta(k *Kind, data []byte) (Object, error) {
	o := k.New()
	into := struct {
		*TypeMeta
		Metadata *ObjectMeta `json:"metadata"`
	}{o.GetTypeMeta(), o.GetObjectMeta()}
	if err := jsonv1.Unmarshal(data, &into); err != nil {
		return nil, err
	}
	return o, nil
}
