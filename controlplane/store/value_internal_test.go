package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// Every value tagged valueS2Dict1 decompresses with values-v1.dict as it
// is now: the file, its repeat offset, and what S2 makes of them (a value
// this skiff wrote, kept here) never change.
func TestValueDictionaryNeverChanges(t *testing.T) {
	sum := sha256.Sum256(valuesDict1)
	if got := hex.EncodeToString(sum[:]); got != "ac01e3932e82f1b591c058ca81dd0e8d90670553f85e735ae80eec2d54a1c988" {
		t.Fatalf("values-v1.dict changed (sha256 %s): the values stored with it no longer read; add a new dictionary and tag instead", got)
	}
	if !bytes.HasPrefix(valuesDict1[valuesDict1Repeat:], []byte(`{"apiVersion":"v1","kind":"Pod"`)) {
		t.Fatalf("valuesDict1Repeat %d is not where the last pod starts", valuesDict1Repeat)
	}
	const want = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"lab-1","namespace":"student-07","uid":"0b0e4a10-3c2d-4f6e-9a8b-7c6d5e4f3a2b","resourceVersion":"42","creationTimestamp":"2026-01-01T00:00:00Z"},"spec":{"containers":[{"name":"main","image":"busybox:1.36","command":["sleep","3600"],"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","schedulerName":"default-scheduler"},"status":{"phase":"Pending","qosClass":"BestEffort"}}`
	stored, err := hex.DecodeString("01830415002c106c61622d311a0b081e17092473747564656e742d3037220c088c30623065346131302d336332642d346636652d396138622d376336643565346633613262521a09083432229e0a0908305a22822008006d36bd112c62757379626f783a312e333636851130736c656570222c223336303022f13615004382900872f605b59f365705002d1518002252fc040c50656e6409000e2a0b1500080c74227d7d")
	if err != nil {
		t.Fatal(err)
	}
	raw, fresh, err := unpackValue(stored)
	if err != nil || !fresh || string(raw) != want {
		t.Fatalf("a value stored with values-v1.dict reads %q, %v; want the pod it was", raw, err)
	}
	// And what this skiff writes for it reads back the same (the encoder
	// may change with S2's versions; the decoding may not).
	var p valuePacker
	again, z := p.pack([]byte(want))
	if again[0] != valueS2Dict1 || !bytes.Equal(z, again) || len(again)*3 > len(want) {
		t.Fatalf("packed into %d bytes, tag %d, for %d of JSON; want tag %d and at most a third", len(again), again[0], len(want), valueS2Dict1)
	}
	if raw, _, err := unpackValue(again); err != nil || string(raw) != want {
		t.Fatalf("the packed pod reads %q, %v", raw, err)
	}
}

// The packer cuts values from a chunk one after another, each its own
// bytes to its end (an append to one cannot reach the next); a value too
// large for a chunk gets its own allocation; and a full chunk is left to
// its values, never written again.
func TestValuePackerChunks(t *testing.T) {
	var p valuePacker
	a, b := p.alloc(100), p.alloc(200)
	if cap(a) != 100 || cap(b) != 200 || &p.chunk[0] != &a[0] || &p.chunk[100] != &b[0] {
		t.Fatalf("two values: cap %d and %d, the second not right after the first", cap(a), cap(b))
	}
	big := p.alloc(valueChunk/8 + 1)
	if len(p.chunk) != 300 || &big[0] == &p.chunk[:cap(p.chunk)][300] {
		t.Fatal("a value larger than an eighth of a chunk was cut from the chunk")
	}
	copy(a, bytes.Repeat([]byte{'a'}, 100))
	first := p.chunk
	for range valueChunk/1000 + 1 { // past the chunk's end
		p.alloc(1000)
	}
	if &p.chunk[0] == &first[0] {
		t.Fatal("the packer went on past its chunk's end")
	}
	if !bytes.Equal(a, bytes.Repeat([]byte{'a'}, 100)) {
		t.Fatal("a value cut earlier changed when the chunk filled")
	}
}

// The committer reads an updated object's stored value into the packer's
// scratch space: the same bytes as unpackValue, with no allocation once
// the space is as large as the values; JSON stored as it is reads as
// itself; a value larger than a chunk is not kept as the scratch space.
func TestValuePackerUnpack(t *testing.T) {
	var p valuePacker
	pod := func(note string) []byte {
		return []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"lab-1","namespace":"student-07","annotations":{"note":"` + note + `"}}}`)
	}
	small, large := pod("a lab room"), pod(string(bytes.Repeat([]byte("lab room "), valueChunk/4)))
	var stored [][]byte
	for _, raw := range [][]byte{small, large} {
		v, _ := p.pack(raw)
		if !compressed(v) {
			t.Fatalf("a pod of %d bytes was stored uncompressed", len(raw))
		}
		stored = append(stored, bytes.Clone(v))
	}
	for i, v := range stored {
		raw, err := p.unpack(v)
		if want := [][]byte{small, large}[i]; err != nil || !bytes.Equal(raw, want) {
			t.Fatalf("value %d unpacks to %d bytes, %v; want its %d of JSON", i, len(raw), err, len(want))
		}
	}
	if cap(p.unpacked) > valueChunk {
		t.Fatalf("the scratch space kept %d bytes, more than a chunk", cap(p.unpacked))
	}
	if n := testing.AllocsPerRun(20, func() {
		if raw, err := p.unpack(stored[0]); err != nil || !bytes.Equal(raw, small) {
			t.Fatalf("unpack again: %v", err)
		}
	}); n != 0 {
		t.Errorf("unpacking a small value again allocated %v times; want 0", n)
	}
	if raw, err := p.unpack(small); err != nil || &raw[0] != &small[0] {
		t.Errorf("JSON stored as it is: %v, or not returned as itself", err)
	}
}
