package api

import (
	"bytes"
	"encoding/json"
	"sync"
)

// Encode returns o's JSON: byte for byte what encoding/json's Marshal
// gives (TestEncodeIsMarshal), in about two thirds of its time for an
// object with managedFields, which every object written through the API
// has (BenchmarkEncodePod).
//
// encoding/json checks and compacts what a json.Marshaler returns, and a
// ManagedFieldsEntry's FieldsV1 (a json.RawMessage) is one: a pod's
// first entry is some 500 bytes, and checking them was more than half of
// the pod's encode. FieldsV1 is valid JSON wherever it comes from (a
// request's JSON is checked as it is decoded; apply and the create's
// cache write compacted JSON: controlplane/apiserver), and where it holds
// nothing compaction would change (no whitespace, none of the characters
// encoding/json escapes for HTML, only ASCII) it is its own compaction.
// Encode then encodes o with a one-byte stand-in for each such FieldsV1
// and puts the JSON in its place. Otherwise, it is json.Marshal.
//
// o's metadata is changed while Encode runs (a copy of its managedFields
// stands in, then the original is put back): o must be the caller's
// alone, as it is for an object on its way to the store.
func Encode(o Object) ([]byte, error) {
	if enc, ok, err := encodeSpliced(o); ok || err != nil {
		return enc, err
	}
	return json.Marshal(o)
}

// encodeSpliced is Encode's way with managedFields, and false where it
// does not apply: no FieldsV1, one that is not verbatimJSON, or an object
// whose JSON does not hold the stand-ins (none of the registered kinds).
func encodeSpliced(o Object) ([]byte, bool, error) {
	m := o.GetObjectMeta()
	orig := m.ManagedFields
	n, size := 0, 0
	for i := range orig {
		raw := orig[i].FieldsV1
		if len(raw) == 0 {
			continue
		}
		if !verbatimJSON(raw) {
			return nil, false, nil
		}
		n++
		size += len(raw) - len(fieldsV1StandIn)
	}
	if n == 0 {
		return nil, false, nil
	}
	stand := make([]ManagedFieldsEntry, len(orig))
	copy(stand, orig)
	for i := range stand {
		if len(stand[i].FieldsV1) > 0 {
			stand[i].FieldsV1 = fieldsV1StandIn
		}
	}
	buf := encodeBuffers.Get().(*bytes.Buffer)
	defer encodeBuffers.Put(buf)
	buf.Reset()
	m.ManagedFields = stand
	err := json.NewEncoder(buf).Encode(o)
	m.ManagedFields = orig
	if err != nil {
		return nil, false, err
	}
	enc := buf.Bytes()
	enc = enc[:len(enc)-1] // Encode's newline
	out := make([]byte, 0, len(enc)+size)
	rest := enc
	for i := range orig {
		raw := orig[i].FieldsV1
		if len(raw) == 0 {
			continue
		}
		// Only an object key can be `"fieldsV1":` unescaped (a quote in a
		// string is escaped), and the metadata, which holds the
		// managedFields in order, is encoded before anything else of the
		// object that could have such a key (TestEncodeMetadataFirst).
		at := bytes.Index(rest, fieldsV1StandInJSON)
		if at < 0 {
			return nil, false, nil // an object whose JSON is not its fields'
		}
		out = append(append(out, rest[:at+len(fieldsV1Key)]...), raw...)
		rest = rest[at+len(fieldsV1StandInJSON):]
	}
	return append(out, rest...), true, nil
}

const fieldsV1Key = `"fieldsV1":`

// encodeBuffers hold an encoding on its way to Encode's result.
var encodeBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

var (
	fieldsV1StandIn     = json.RawMessage("0")
	fieldsV1StandInJSON = []byte(fieldsV1Key + "0")
)

// verbatimJSON reports whether valid JSON raw is what encoding/json
// writes for it as a json.RawMessage: it has no whitespace to remove and
// nothing to escape (<, >, &, and U+2028 and U+2029, which are not ASCII).
func verbatimJSON(raw []byte) bool {
	for _, c := range raw {
		if !verbatimByte[c] {
			return false
		}
	}
	return true
}

var verbatimByte = func() (t [256]bool) {
	for c := '!'; c < 0x7f; c++ {
		t[c] = c != '<' && c != '>' && c != '&'
	}
	return t
}()
