package store

import (
	"bytes"
	"fmt"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"

	"skiff.dev/skiff/api"
)

// The committer's reads of stored JSON
//
// For every update the committer checks the stored object's uid and
// resourceVersion, and writes the new object with the next revision as its
// resourceVersion. Both are about metadata, which skiff's encoding puts
// after apiVersion and kind, with name, namespace, uid, resourceVersion
// and creationTimestamp before labels and managedFields. So the committer
// reads tokens from the start only until it has what it needs
// (scanMetadata), instead of decoding or encoding the whole object on its
// single goroutine (BenchmarkReadStoredMeta, BenchmarkWithResourceVersion).

// storedMeta is the part of a stored object an update checks.
type storedMeta struct {
	UID, ResourceVersion string
	CreationTimestamp    api.Time
}

// readStoredMeta reads metadata.uid, resourceVersion and creationTimestamp
// of a stored object, stopping once it has all three. Absent fields are
// left zero, as encoding/json would leave them.
func readStoredMeta(raw []byte) (storedMeta, error) {
	var m storedMeta
	found := 0
	err := scanMetadata(raw, func(d *jsontext.Decoder, name string) (bool, error) {
		var err error
		switch name {
		case "uid":
			m.UID, err = readString(d)
		case "resourceVersion":
			m.ResourceVersion, err = readString(d)
		case "creationTimestamp":
			var v jsontext.Value
			if v, err = d.ReadValue(); err == nil {
				err = m.CreationTimestamp.UnmarshalJSON(v)
			}
		default:
			return false, d.SkipValue()
		}
		found++
		return found == 3, err
	})
	return m, err
}

// withResourceVersion returns enc, the JSON of an object whose
// metadata.resourceVersion is old, with rv in its place: byte for byte the
// encoding of the object with rv set, without encoding it again. When rv
// is as long as old, rv is written over old in enc itself, which it
// returns; else a copy. It returns nil when enc's resourceVersion is not
// old.
func withResourceVersion(enc []byte, old, rv string) ([]byte, error) {
	var out []byte
	err := scanMetadata(enc, func(d *jsontext.Decoder, name string) (bool, error) {
		if name != "resourceVersion" {
			return false, d.SkipValue()
		}
		v, err := d.ReadValue()
		if err != nil {
			return true, err
		}
		end := int(d.InputOffset())
		start := end - len(v)
		if string(v) != `"`+old+`"` { // revisions are digits: no escapes
			return true, nil
		}
		if len(rv) == len(old) {
			copy(enc[start+1:end-1], rv)
			out = enc
			return true, nil
		}
		out = make([]byte, 0, len(enc)-len(old)+len(rv))
		out = append(out, enc[:start]...)
		out = append(out, '"')
		out = append(out, rv...)
		out = append(out, '"')
		out = append(out, enc[end:]...)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scanMetadata calls field for each member of raw's top-level metadata
// object, in order, with d at the member's value: field reads or skips the
// value, and returns true when it needs nothing more. Unless field stops
// it, the whole of raw is read (and so checked).
func scanMetadata(raw []byte, field func(d *jsontext.Decoder, name string) (stop bool, err error)) error {
	d := decoders.Get().(*jsontext.Decoder)
	defer decoders.Put(d)
	defer d.Reset(noInput) // drop raw: it may be bbolt's, valid only in its transaction
	d.Reset(bytes.NewBuffer(raw))
	return readObject(d, func(name string) (bool, error) {
		if name != "metadata" {
			return false, d.SkipValue()
		}
		stopped := false
		err := readObject(d, func(name string) (bool, error) {
			var err error
			stopped, err = field(d, name)
			return stopped, err
		})
		return stopped, err
	})
}

// readObject reads a JSON object from d, calling member for each member
// with d at its value; member reads the value and returns true to stop
// before the object ends.
func readObject(d *jsontext.Decoder, member func(name string) (stop bool, err error)) error {
	if err := readDelim(d, '{'); err != nil {
		return err
	}
	for d.PeekKind() == '"' {
		key, err := d.ReadToken()
		if err != nil {
			return err
		}
		if stop, err := member(key.String()); stop || err != nil {
			return err
		}
	}
	return readDelim(d, '}')
}

// decoders are scanMetadata's, kept between calls.
var decoders = sync.Pool{New: func() any { return jsontext.NewDecoder(noInput) }}

// noInput is what a decoder reads while it waits in decoders.
var noInput = strings.NewReader("")

// readString reads a string value (null: "").
func readString(d *jsontext.Decoder) (string, error) {
	tok, err := d.ReadToken()
	switch {
	case err != nil:
		return "", err
	case tok.Kind() == 'n':
		return "", nil
	case tok.Kind() != '"':
		return "", fmt.Errorf("expected a string, found %v", tok.Kind())
	}
	return tok.String(), nil
}

// readDelim reads the token delim ('{' or '}') or fails.
func readDelim(d *jsontext.Decoder, delim jsontext.Kind) error {
	tok, err := d.ReadToken()
	if err != nil {
		return err
	}
	if tok.Kind() != delim {
		return fmt.Errorf("expected %v, found %v", delim, tok.Kind())
	}
	return nil
}
