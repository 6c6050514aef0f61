package store

import (
	"fmt"

	"github.com/klauspost/compress/s2"

	"skiff.dev/skiff/api"
)

// Stored values
//
// bbolt holds each object as its JSON (a value that starts with '{'), or,
// where that is smaller, as valueS2 followed by the S2 block encoding of
// the JSON: a pod's 2 KB keeps 60–65 %. Fewer bytes are fewer pages:
// less to write and fsync at each commit, less garbage from bbolt's page
// buffers, and less of state.db mapped into the server's resident memory
// (docs/performance.md, tenth sitting). The committer compresses each
// write once; the watch history keeps the same bytes (hubEvent.z). A read
// pays the decompression, about 6 µs a pod against 40 µs to decode it.
//
// A store written before values were compressed reads as it is; each
// object is compressed at its next write. A skiff older than this one
// cannot read a compressed value: going back to one means restoring a
// snapshot taken before the upgrade (docs/stores.md).

// valueS2 starts a compressed value; JSON never starts with it.
const valueS2 byte = 0

// packValue returns what bbolt stores for raw and, when that is raw
// compressed, the compressed bytes alone (a part of stored; nil when raw is
// stored as it is). buf is the caller's scratch space. stored is never
// changed after.
func packValue(raw []byte, buf *[]byte) (stored, z []byte) {
	n := s2.MaxEncodedLen(len(raw))
	if n < 0 {
		return raw, nil // too large for S2
	}
	if n > len(*buf) {
		*buf = make([]byte, n)
	}
	enc := s2.Encode(*buf, raw)
	if len(enc)+1 >= len(raw) {
		return raw, nil
	}
	stored = make([]byte, 1+len(enc))
	stored[0] = valueS2
	copy(stored[1:], enc)
	return stored, stored[1:]
}

// unpackValue returns the JSON of v, a value as bbolt holds it: v itself
// (fresh false: valid only as long as v is) when it is stored as JSON,
// else a new slice.
func unpackValue(v []byte) (raw []byte, fresh bool, err error) {
	if len(v) == 0 || v[0] != valueS2 {
		return v, false, nil
	}
	raw, err = s2.Decode(nil, v[1:])
	if err != nil {
		return nil, false, fmt.Errorf("decompress: %w", err)
	}
	return raw, true, nil
}

// decodeValue turns a value as bbolt holds it into a fresh object of kind
// k (nothing of v is kept).
func decodeValue(k *api.Kind, v []byte) (api.Object, error) {
	raw, _, err := unpackValue(v)
	if err != nil {
		return nil, api.NewInternal(fmt.Errorf("decode stored %s: %w", k.GroupResource(), err))
	}
	return decode(k, raw)
}
