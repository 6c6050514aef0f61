package api

import (
	"encoding/json"
	"fmt"
)

// Placeholder bodies: the api helper replaces this file with strict decoding
// (unknown fields rejected with their path). Signatures are the contract.

// Document is one decoded document of a YAML or JSON stream.
type Document struct {
	// Index of the document in the stream, from 0.
	Index int
	// Object decoded, nil when Err is set.
	Object Object
	// Kind of the object (nil when apiVersion/kind were not understood).
	Kind *Kind
	// Err explains why the document could not be decoded.
	Err error
}

// DecodeJSON decodes one JSON object of kind k strictly: unknown fields are
// an error naming their path.
func DecodeJSON(k *Kind, data []byte) (Object, error) {
	o := k.New()
	if err := json.Unmarshal(data, o); err != nil {
		return nil, fmt.Errorf("decode %s: %w", k.Kind, err)
	}
	return o, nil
}

// DecodeAny decodes one JSON or YAML object whose kind is named by its own
// apiVersion and kind.
func DecodeAny(data []byte) (Object, *Kind, error) {
	var tm TypeMeta
	if err := json.Unmarshal(data, &tm); err != nil {
		return nil, nil, err
	}
	k, err := LookupKind(tm.APIVersion, tm.Kind)
	if err != nil {
		return nil, nil, err
	}
	o, err := DecodeJSON(k, data)
	return o, k, err
}

// DecodeStream splits a multi-document YAML (or JSON, or a v1 List) stream
// into documents and decodes each; one bad document does not stop the others.
func DecodeStream(data []byte) []Document {
	o, k, err := DecodeAny(data)
	return []Document{{Object: o, Kind: k, Err: err}}
}
