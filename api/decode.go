package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"sigs.k8s.io/yaml"
)

// Decoding is strict, as the course needs it to be: a field skiff does not
// implement is an error naming its path, never silently dropped.
//
// YAML is converted to JSON (sigs.k8s.io/yaml, as kubectl does), the JSON is
// read into a generic tree and that tree is walked against the Go type by
// reflection and json tags (see strict.go). Only a tree with no problems is
// unmarshalled into the typed object. A JSON request with nothing wrong in
// it (DecodeClean) skips the tree: one strict decode says so.

// Document is one decoded document of a YAML or JSON stream.
// +k8s:deepcopy-gen=false
type Document struct {
	// Index of the document in the stream, from 0, counting only non-empty
	// documents. Items of a List share their List's Index.
	Index int
	// Path is "" for a top-level document and "items[N]" for an item of a List.
	Path string
	// Line is the first line of the document in the stream, from 1 (0 when unknown).
	Line int
	// Object decoded, nil when Err is set.
	Object Object
	// Kind of the object (nil when apiVersion/kind were not understood).
	// It is set even when Err is, if the kind was understood.
	Kind *Kind
	// Err explains why the document could not be decoded; a *DecodeError.
	Err error
}

// DecodeError is why one object could not be decoded. Callers that want the
// field problems use errors.As to reach it (or its Fields).
// +k8s:deepcopy-gen=false
type DecodeError struct {
	// Index of the document in its stream, from 0; -1 outside a stream.
	// Error() counts from 1, as people do.
	Index int
	// Line where the document starts, from 1; 0 when unknown.
	Line int
	// Path within the document: "items[2]" for an item of a List.
	Path string
	// Kind and Name of the object, when they could be read.
	Kind, Name string
	// Fields lists strict-decoding problems: unknown fields and values of
	// the wrong type, each with its path.
	Fields FieldErrors
	// Err is any other cause: YAML syntax, missing or unknown apiVersion/kind.
	Err error
}

// Error reads like `document 2 at line 14 (Deployment "web"): error
// validating data: spec.replcas: unknown field: did you mean "replicas"?`.
func (e *DecodeError) Error() string {
	var b strings.Builder
	if e.Index >= 0 {
		fmt.Fprintf(&b, "document %d", e.Index+1)
		if e.Line > 0 {
			fmt.Fprintf(&b, " at line %d", e.Line)
		}
	}
	if e.Path != "" {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(e.Path)
	}
	if e.Kind != "" {
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		b.WriteString("(" + e.Kind)
		if e.Name != "" {
			fmt.Fprintf(&b, " %q", e.Name)
		}
		b.WriteString(")")
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	switch {
	case e.Err != nil:
		b.WriteString(e.Err.Error())
	case len(e.Fields) > 0:
		b.WriteString("error validating data: " + e.Fields.Error())
	default:
		b.WriteString("cannot decode")
	}
	return b.String()
}

// Unwrap returns the cause: Err, or Fields.
func (e *DecodeError) Unwrap() error {
	if e.Err != nil {
		return e.Err
	}
	if len(e.Fields) > 0 {
		return e.Fields
	}
	return nil
}

// DecodeJSON decodes one JSON object of kind k strictly: unknown fields are
// an error naming their path. apiVersion and kind may be omitted; when
// present they must name k. The error is a *DecodeError.
func DecodeJSON(k *Kind, data []byte) (Object, error) {
	o, _, err := DecodeJSONWith(k, data, FieldValidationStrict)
	return o, err
}

// FieldValidation is what decoding does with a field the type does not
// have and with a key given twice: kube-apiserver's fieldValidation query
// parameter, with its values.
type FieldValidation string

const (
	// FieldValidationStrict: either is an error naming its path (skiff's
	// default, and kubectl's).
	FieldValidationStrict FieldValidation = "Strict"
	// FieldValidationWarn: unknown fields are dropped and the last of
	// duplicate keys kept; each is reported back to be sent as a warning.
	FieldValidationWarn FieldValidation = "Warn"
	// FieldValidationIgnore: as Warn, without warnings.
	FieldValidationIgnore FieldValidation = "Ignore"
)

// DecodeJSONWith is DecodeJSON under field validation mode fv. Under Warn
// and Ignore, unknown fields (FieldUnknownField) and duplicate keys
// (FieldDuplicateField) are no errors: they are returned as dropped. A
// Kubernetes field skiff does not support (FieldUnknown) and
// a value of the wrong type are errors in every mode: dropping them would
// run something other than what the file asks for.
func DecodeJSONWith(k *Kind, data []byte, fv FieldValidation) (Object, FieldErrors, error) {
	if o, ok := DecodeClean(k, data); ok {
		return o, nil, nil
	}
	return decodeJSONChecked(k, data, fv)
}

// DecodeClean decodes data into a new object of kind k when it is what
// nearly every request sends: a JSON object of k's own version, every name
// a field of its type (in its case, given once), every value of its field's
// type, and nothing after it. Such a document is decoded in one pass, by
// go-json-experiment, instead of being parsed into a tree, walked by
// checkStrict and decoded again: checkStrict would find nothing in it, and
// the object is the same (TestDecodeCleanIsChecked). Anything else, and a
// type that holds an interface value, answers false, and decodeJSONChecked
// says what is wrong.
func DecodeClean(k *Kind, data []byte) (Object, bool) {
	if holdsInterface(k.Type) {
		return nil, false
	}
	o := k.New()
	if jsonv2.Unmarshal(data, o, cleanOptions) != nil {
		return nil, false
	}
	if tm := o.GetTypeMeta(); tm.APIVersion != k.APIVersion() || tm.Kind != k.Kind {
		return nil, false // another served version, or not this kind
	}
	return o, true
}

// decodeJSONChecked is DecodeJSONWith of any document: parsed, checked
// field by field (checkStrict), then decoded.
func decodeJSONChecked(k *Kind, data []byte, fv FieldValidation) (Object, FieldErrors, error) {
	v, err := parseJSON(data)
	if err != nil {
		return nil, nil, &DecodeError{Index: -1, Kind: k.Kind, Err: err}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, nil, &DecodeError{Index: -1, Kind: k.Kind, Err: fmt.Errorf("expected a JSON object, got %s", jsonTypeName(v))}
	}
	if av, kd := stringField(m, "apiVersion"), stringField(m, "kind"); (av != "" && av != k.APIVersion() && !k.servesAPIVersion(av)) || (kd != "" && kd != k.Kind) {
		return nil, nil, &DecodeError{Index: -1, Kind: k.Kind, Name: metaName(m),
			Err: fmt.Errorf("the object is %s %s, not %s %s", av, kd, k.APIVersion(), k.Kind)}
	}
	return decodeTypedWith(k, m, data, -1, fv)
}

// DecodeAny decodes one JSON or YAML object whose kind is named by its own
// apiVersion and kind. The error is a *DecodeError.
func DecodeAny(data []byte) (Object, *Kind, error) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		e := yamlDecodeError(data, err, -1, 1)
		e.Line = 0
		return nil, nil, e
	}
	d := decodeDocument(j, 0, 0)
	if len(d) != 1 || d[0].Path != "" {
		return nil, nil, &DecodeError{Index: -1, Err: errors.New("expected one object, got a List")}
	}
	if e, ok := d[0].Err.(*DecodeError); ok {
		e.Index, e.Line = -1, 0
	}
	return d[0].Object, d[0].Kind, d[0].Err
}

// DecodeStream splits a multi-document YAML (or JSON, or a v1 List) stream
// into documents and decodes each; one bad document does not stop the others.
// Empty documents (only comments or whitespace) are skipped.
func DecodeStream(data []byte) []Document {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // UTF-8 BOM
	if docs, ok := decodeJSONStream(data); ok {
		return docs
	}
	var out []Document
	index := 0
	for _, raw := range splitYAML(data) {
		if raw.err != nil {
			out = append(out, Document{Index: index, Line: raw.line, Err: &DecodeError{Index: index, Line: raw.line, Err: raw.err}})
			index++
			continue
		}
		j, err := yaml.YAMLToJSONStrict(raw.data)
		if err != nil {
			out = append(out, Document{Index: index, Line: raw.line, Err: yamlDecodeError(raw.data, err, index, raw.line)})
			index++
			continue
		}
		if t := bytes.TrimSpace(j); len(t) == 0 || string(t) == "null" {
			continue // empty document
		}
		out = append(out, decodeDocument(j, index, raw.line)...)
		index++
	}
	return out
}

// decodeJSONStream decodes data as a sequence of JSON values when it looks
// like JSON; ok is false when it should be read as YAML instead.
func decodeJSONStream(data []byte) ([]Document, bool) {
	t := bytes.TrimSpace(data)
	if len(t) == 0 || t[0] != '{' {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var out []Document
	for index := 0; ; index++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == io.EOF {
			return out, true
		}
		if err != nil {
			if index == 0 {
				return nil, false // perhaps a YAML flow mapping: {a: 1}
			}
			return append(out, Document{Index: index, Err: &DecodeError{Index: index, Err: fmt.Errorf("invalid JSON: %w", err)}}), true
		}
		out = append(out, decodeDocument(raw, index, 0)...)
	}
}

// decodeDocument decodes one JSON document: an object, or a List of them.
func decodeDocument(j []byte, index, line int) []Document {
	fail := func(err error) []Document {
		return []Document{{Index: index, Line: line, Err: &DecodeError{Index: index, Line: line, Err: err}}}
	}
	v, err := parseJSON(j)
	if err != nil {
		return fail(err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return fail(fmt.Errorf("expected an object with apiVersion and kind, got %s", jsonTypeName(v)))
	}
	if itemKind, isList := listKind(m); isList {
		return decodeList(m, j, itemKind, index, line)
	}
	k, kerr := kindOf(m)
	if kerr != nil {
		return []Document{{Index: index, Line: line, Err: &DecodeError{Index: index, Line: line, Kind: stringField(m, "kind"), Name: metaName(m), Err: kerr}}}
	}
	o, err := decodeTyped(k, m, j, index)
	d := Document{Index: index, Line: line, Object: o, Kind: k, Err: err}
	if e, ok := err.(*DecodeError); ok {
		e.Line = line
	}
	return []Document{d}
}

// listKind reports whether m is a List ("List", or "PodList" and the like,
// as the API returns); itemKind is the kind its items default to.
func listKind(m map[string]any) (itemKind *Kind, isList bool) {
	kind := stringField(m, "kind")
	if kind == "List" {
		return nil, true
	}
	if base, ok := strings.CutSuffix(kind, "List"); ok && base != "" {
		for _, k := range Kinds {
			if k.Kind == base {
				return k, true
			}
		}
	}
	return nil, false
}

// decodeList decodes the items of List m, whose JSON is j.
func decodeList(m map[string]any, j []byte, itemKind *Kind, index, line int) []Document {
	fail := func(fe FieldErrors, err error) []Document {
		return []Document{{Index: index, Line: line, Err: &DecodeError{Index: index, Line: line, Kind: stringField(m, "kind"), Fields: fe, Err: err}}}
	}
	var fe FieldErrors
	for _, key := range sortedKeys(m) {
		switch key {
		case "apiVersion", "kind", "metadata", "items":
		default:
			fe = append(fe, UnknownField(key, ""))
		}
	}
	items, ok := m["items"].([]any)
	if !ok && m["items"] != nil {
		fe = append(fe, Invalid("items", jsonTypeName(m["items"]), "expected a list"))
	}
	// Each item is decoded from its own bytes, so that keys it gives twice
	// are seen (m holds only the last of them).
	var list struct {
		APIVersion json.RawMessage   `json:"apiVersion"`
		Kind       json.RawMessage   `json:"kind"`
		Metadata   json.RawMessage   `json:"metadata"`
		Items      []json.RawMessage `json:"items"`
	}
	if ok {
		dups, err := unmarshalTyped(j, &list)
		if err != nil { // cannot happen: m came from j
			return fail(nil, err)
		}
		fe = append(fe, dups...)
	}
	if len(fe) > 0 {
		return fail(fe, nil)
	}
	var out []Document
	for i, it := range items {
		path := fmt.Sprintf("items[%d]", i)
		im, ok := it.(map[string]any)
		if !ok {
			out = append(out, Document{Index: index, Line: line, Path: path, Err: &DecodeError{Index: index, Line: line, Path: path,
				Err: fmt.Errorf("expected an object, got %s", jsonTypeName(it))}})
			continue
		}
		if itemKind != nil {
			if _, ok := im["apiVersion"]; !ok {
				im["apiVersion"] = itemKind.APIVersion()
			}
			if _, ok := im["kind"]; !ok {
				im["kind"] = itemKind.Kind
			}
		}
		d := Document{Index: index, Line: line, Path: path}
		k, err := kindOf(im)
		if err != nil {
			d.Err = &DecodeError{Index: index, Line: line, Path: path, Kind: stringField(im, "kind"), Name: metaName(im), Err: err}
			out = append(out, d)
			continue
		}
		d.Kind = k
		d.Object, d.Err = decodeTyped(k, im, list.Items[i], index)
		if e, ok := d.Err.(*DecodeError); ok {
			e.Line, e.Path = line, path
		}
		out = append(out, d)
	}
	return out
}

// kindOf reads apiVersion and kind of a generic object and finds the kind.
func kindOf(m map[string]any) (*Kind, error) {
	av, avOK := m["apiVersion"].(string)
	kd, kdOK := m["kind"].(string)
	var missing []string
	if !avOK || av == "" {
		missing = append(missing, "apiVersion")
	}
	if !kdOK || kd == "" {
		missing = append(missing, "kind")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s not set: every object needs apiVersion and kind (e.g. \"apiVersion: apps/v1\" and \"kind: Deployment\")",
			strings.Join(missing, " and "))
	}
	return LookupKind(av, kd)
}

// decodeTyped checks m strictly against k's type and, when it is clean,
// unmarshals data (the JSON of m) into a new object.
// Keys given twice in data (which m, a map, cannot show) are reported with
// the other problems.
func decodeTyped(k *Kind, m map[string]any, data []byte, index int) (Object, error) {
	o, _, err := decodeTypedWith(k, m, data, index, FieldValidationStrict)
	return o, err
}

// decodeTypedWith is decodeTyped under field validation mode fv; dropped
// lists what Warn and Ignore let through (see DecodeJSONWith).
func decodeTypedWith(k *Kind, m map[string]any, data []byte, index int, fv FieldValidation) (o Object, dropped FieldErrors, err error) {
	if data, err = toStoredTree(k, m, data); err != nil { // a further served version (versions.go)
		return nil, nil, &DecodeError{Index: index, Kind: k.Kind, Name: metaName(m), Err: err}
	}
	fe := checkStrict(m, k.Type)
	o = k.New()
	dups, err := unmarshalTyped(data, o)
	fe = append(fe, dups...)
	if fv == FieldValidationWarn || fv == FieldValidationIgnore {
		var keep FieldErrors
		for _, e := range fe {
			if e.Type == FieldUnknownField || e.Type == FieldDuplicateField {
				dropped = append(dropped, e)
			} else {
				keep = append(keep, e)
			}
		}
		fe = keep
	}
	if len(fe) > 0 {
		return nil, nil, &DecodeError{Index: index, Kind: k.Kind, Name: metaName(m), Fields: fe}
	}
	if err != nil {
		return nil, nil, &DecodeError{Index: index, Kind: k.Kind, Name: metaName(m), Err: err}
	}
	*o.GetTypeMeta() = TypeMeta{APIVersion: k.APIVersion(), Kind: k.Kind}
	return o, dropped, nil
}

// parseJSON reads one JSON value keeping numbers exact (json.Number).
func parseJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: data after the first value")
	}
	return v, nil
}

func stringField(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

func metaName(m map[string]any) string {
	md, _ := m["metadata"].(map[string]any)
	return stringField(md, "name")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// yamlSeparator reports whether line is a document separator ("---",
// optionally followed by a comment), and whether it is a malformed one
// ("--- foo": content after the separator, which kubectl also rejects).
func yamlSeparator(line []byte) (sep, bad bool) {
	line = bytes.TrimRight(line, "\r\n")
	if !bytes.HasPrefix(line, []byte("---")) {
		return false, false
	}
	rest := line[3:]
	if len(rest) > 0 && rest[0] != ' ' && rest[0] != '\t' && rest[0] != '#' {
		return false, false // "----" is content, not a separator
	}
	rest = bytes.TrimSpace(rest)
	if len(rest) == 0 || rest[0] == '#' {
		return true, false
	}
	return true, true
}

type rawYAML struct {
	data []byte
	line int // first line, from 1
	err  error
}

// splitYAML splits a stream on "---" lines; "..." lines end a document.
func splitYAML(data []byte) []rawYAML {
	var out []rawYAML
	var cur bytes.Buffer
	start, lineNo := 1, 0
	skip := false // after "...", ignore until the next separator
	flush := func(next int) {
		if cur.Len() > 0 {
			out = append(out, rawYAML{data: bytes.Clone(cur.Bytes()), line: start})
		}
		cur.Reset()
		start = next
	}
	for len(data) > 0 {
		lineNo++
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i+1], data[i+1:]
		} else {
			line, data = data, nil
		}
		if sep, bad := yamlSeparator(line); sep {
			flush(lineNo + 1)
			skip = false
			if bad {
				// Report it, and read what follows as the next document.
				out = append(out, rawYAML{line: lineNo, err: fmt.Errorf("invalid YAML document separator: %s", bytes.TrimSpace(line))})
			}
			continue
		}
		if string(bytes.TrimRight(line, "\r\n")) == "..." {
			flush(lineNo + 1)
			skip = true
			continue
		}
		if skip {
			start = lineNo + 1
			continue
		}
		cur.Write(line)
	}
	flush(lineNo + 1)
	return out
}

// yamlDecodeError explains why YAMLToJSONStrict refused document data
// (starting at line firstLine of its stream): the paths of keys given twice
// when that was the reason, the YAML error otherwise.
func yamlDecodeError(data []byte, err error, index, firstLine int) *DecodeError {
	e := &DecodeError{Index: index, Line: firstLine}
	dups := yamlDuplicates(data, firstLine)
	if len(dups) == 0 {
		e.Err = yamlError(err, firstLine-1)
		return e
	}
	e.Fields = dups
	// Name the object when the document reads without the strict check.
	if j, err := yaml.YAMLToJSON(data); err == nil {
		if v, err := parseJSON(j); err == nil {
			if m, ok := v.(map[string]any); ok {
				e.Kind, e.Name = stringField(m, "kind"), metaName(m)
			}
		}
	}
	return e
}

// yamlError makes a YAML error's "line N" count from the stream's start.
func yamlError(err error, offset int) error {
	msg := err.Error()
	const marker = "line "
	if offset > 0 {
		if i := strings.Index(msg, "yaml: "+marker); i >= 0 {
			j := i + len("yaml: "+marker)
			k := j
			for k < len(msg) && msg[k] >= '0' && msg[k] <= '9' {
				k++
			}
			if n, convErr := strconv.Atoi(msg[j:k]); convErr == nil {
				msg = msg[:j] + strconv.Itoa(n+offset) + msg[k:]
			}
		}
	}
	msg = strings.TrimPrefix(msg, "error converting YAML to JSON: ")
	return fmt.Errorf("invalid YAML: %s", msg)
}
