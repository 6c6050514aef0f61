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
