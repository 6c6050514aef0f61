package store

import (
	_ "embed"
	"fmt"
	"sync"

	"github.com/klauspost/compress/s2"

	"skiff.dev/skiff/api"
)

// Stored values
//
// bbolt holds each object as its JSON (a value that starts with '{'), or,
// where that is smaller, as a tag byte followed by the S2 block encoding
// of the JSON. The tag says how to decompress it:
//
//   - valueS2Dict1 (what this skiff writes): S2 with the dictionary
//     values-v1.dict, a few objects as skiff encodes them (a node, a
//     lease, an EndpointSlice, a ReplicaSet, the Events of a pod's start
//     and two pods). What every pod shares with them (field names, the
//     kube-api-access volume, default values, conditions) costs a few
//     bytes, so a pod's 2.3 KB of JSON keeps about 16 % (365 bytes, 27 %
//     of what S2 alone keeps) and an Event's 750 bytes about 33 %.
//   - valueS2: S2 alone, what skiff wrote before values-v1.dict
//     (docs/performance.md, tenth and eighteenth sittings).
//
// Fewer bytes are fewer pages: less to write and fsync at each commit,
// less garbage from bbolt's page buffers, and less of state.db mapped into
// the server's resident memory. The committer compresses each write once;
// the watch history keeps the same bytes (hubEvent.z). A read pays the
// decompression, about 1 µs a pod against 40 µs to decode it.
//
// A store written before reads as it is; each object takes this skiff's
// form at its next write. A skiff older than this one cannot read what
// this one writes: going back means restoring a snapshot taken before the
// upgrade (docs/stores.md).
//
// values-v1.dict must never change: every value tagged valueS2Dict1
// decompresses with it (TestValueDictionaryNeverChanges). A better
// dictionary is a new file and a new tag, with this one still read.

const (
	// valueS2 starts a value compressed without a dictionary; JSON never
	// starts with it.
	valueS2 byte = 0
	// valueS2Dict1 starts a value compressed with values-v1.dict.
	valueS2Dict1 byte = 1
)

//go:embed values-v1.dict
var valuesDict1 []byte

// valuesDict1Repeat is where S2's first repeat offset points in
// values-v1.dict: the last pod's start, as most values start. Fixed with
// the file, since a decoder must use the encoder's.
const valuesDict1Repeat = 12683

// dict1 is values-v1.dict as S2 uses it; its tables are built at its
// first use, and it is safe for concurrent use.
var dict1 = sync.OnceValue(func() *s2.Dict {
	d := s2.MakeDictManual(valuesDict1, valuesDict1Repeat)
	if d == nil {
		panic("store: values-v1.dict is not an S2 dictionary")
	}
	return d
})

// valuePacker packs values (pack) and reads the stored ones it replaces
// (unpack): the committer's, one goroutine's. buf is its scratch space for
// the compressor, unpacked for the decompressor. chunk is where the values
// it returns are cut from, one after another: the watch history keeps the
// last HistorySize of them (10,000 by default, about 3 MB), and each
// allocated on its own they lay scattered among a burst's garbage, keeping
// most of the heap's spans in use after it (docs/performance.md,
// nineteenth sitting). Cut from chunks in the order they are written, they
// leave the history in that order too, and a chunk is freed with its last
// value. A value is never written again once cut: a chunk is only ever
// appended to.
type valuePacker struct {
	buf      []byte
	unpacked []byte
	chunk    []byte
}

// unpack is unpackValue for the committer: the JSON of v, decompressed
// into the packer's scratch space, valid until the next unpack (an
// update's stored object is read for its metadata alone, which keeps
// nothing of it: storedMeta's strings are copies). The space kept is at
// most valueChunk: a larger object is decompressed into its own.
func (p *valuePacker) unpack(v []byte) ([]byte, error) {
	raw, err := unpackValueTo(p.unpacked[:0], v)
	if err == nil && compressed(v) && cap(raw) > cap(p.unpacked) && cap(raw) <= valueChunk {
		p.unpacked = raw
	}
	return raw, err
}

// valueChunk is the size of the chunks values are cut from; a value
// larger than an eighth of it gets its own allocation.
const valueChunk = 64 << 10

// alloc returns n bytes of the current chunk, or of a new one.
func (p *valuePacker) alloc(n int) []byte {
	if n > valueChunk/8 {
		return make([]byte, n)
	}
	if len(p.chunk)+n > cap(p.chunk) {
		p.chunk = make([]byte, 0, valueChunk)
	}
	at := len(p.chunk)
	p.chunk = p.chunk[:at+n]
	return p.chunk[at : at+n : at+n]
}

// pack returns what bbolt stores for raw and, when that is raw
// compressed, the same bytes as z (nil when raw is stored as it is).
// stored is never changed after.
func (p *valuePacker) pack(raw []byte) (stored, z []byte) {
	n := s2.MaxEncodedLen(len(raw))
	if n < 0 {
		return raw, nil // too large for S2
	}
	if n > cap(p.buf) {
		p.buf = make([]byte, n)
	}
	enc := dict1().Encode(p.buf, raw)
	if len(enc)+1 >= len(raw) {
		return raw, nil
	}
	stored = p.alloc(1 + len(enc))
	stored[0] = valueS2Dict1
	copy(stored[1:], enc)
	return stored, stored
}

// unpackValue returns the JSON of v, a value as bbolt holds it: v itself
// (fresh false: valid only as long as v is) when it is stored as JSON,
// else a new slice.
func unpackValue(v []byte) (raw []byte, fresh bool, err error) {
	raw, err = unpackValueTo(nil, v)
	return raw, err == nil && compressed(v), err
}

// compressed reports whether v, a value as bbolt holds it, is compressed.
func compressed(v []byte) bool {
	return len(v) > 0 && (v[0] == valueS2Dict1 || v[0] == valueS2)
}

// unpackValueTo is unpackValue into dst's room (a new slice where it is
// too small) when v is compressed; else raw is v itself.
func unpackValueTo(dst, v []byte) (raw []byte, err error) {
	if !compressed(v) {
		return v, nil
	}
	if v[0] == valueS2Dict1 {
		raw, err = dict1().Decode(dst, v[1:])
	} else {
		raw, err = s2.Decode(dst, v[1:])
	}
	if err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	return raw, nil
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
