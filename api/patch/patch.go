package patch

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"sync"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/util/jsonmergepatch"
	"k8s.io/apimachinery/pkg/util/mergepatch"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// Type is a patch type, named by its media type (the request's Content-Type).
type Type string

// The patch types of the Kubernetes API.
const (
	JSONPatch      Type = "application/json-patch+json"
	MergePatch     Type = "application/merge-patch+json"
	StrategicPatch Type = "application/strategic-merge-patch+json"
	// ApplyPatch is server-side apply, which skiff does not implement.
	ApplyPatch Type = "application/apply-patch+yaml"
)

// ParseType returns the patch type of a Content-Type header, parameters
// ("; charset=utf-8") dropped. It does not say whether the type is supported:
// see Supported.
func ParseType(contentType string) Type {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return Type(contentType)
	}
	return Type(mt)
}

// Supported lists the patch types accepted for apiVersion/kind, in
// kube-apiserver's order: strategic merge patch only for kinds with a
// Kubernetes struct.
func Supported(apiVersion, kind string) []Type {
	if HasSchema(apiVersion, kind) {
		return []Type{JSONPatch, MergePatch, StrategicPatch}
	}
	return []Type{JSONPatch, MergePatch}
}

// LastAppliedAnnotation holds, on an object that `apply` wrote, the JSON of
// the file it applied: the original of the next three-way patch.
const LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// MaxJSONPatchOperations is kube-apiserver's limit on the operations of one
// JSON patch.
const MaxJSONPatchOperations = 10000

// Reason classifies a failed patch.
type Reason int

const (
	// Malformed: the patch is not a valid patch of its type (HTTP 400).
	Malformed Reason = iota + 1
	// NotApplicable: a well-formed patch that does not fit the document, such
	// as a failed JSON patch test or a path that is not there (HTTP 422).
	NotApplicable
	// TooLarge: a JSON patch of more than MaxJSONPatchOperations (HTTP 413).
	TooLarge
)

// Error is a patch that could not be applied. Its message is the library's,
// which is what kube-apiserver reports.
type Error struct {
	Reason Reason
	Err    error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Apply applies a patch of type t to doc, the JSON of an object of
// apiVersion/kind, and returns the patched JSON. A strategic merge patch of
// a kind without schema fails with ErrNoSchema; an unknown type with an
// error naming it.
func Apply(t Type, apiVersion, kind string, doc, p []byte) ([]byte, error) {
	switch t {
	case JSONPatch:
		return JSON(doc, p)
	case MergePatch:
		return Merge(doc, p)
	case StrategicPatch:
		return Strategic(apiVersion, kind, doc, p)
	}
	return nil, fmt.Errorf("%s: unimplemented patch type", t)
}

// Merge applies an RFC 7386 merge patch, which must be a JSON object.
func Merge(doc, p []byte) ([]byte, error) {
	if err := checkObject(p); err != nil {
		return nil, err
	}
	out, err := jsonpatch.MergePatch(doc, p)
	if err != nil {
		return nil, &Error{Reason: Malformed, Err: err}
	}
	return out, nil
}

// MaxJSONPatchCopyBytes bounds how much the "copy" operations of one JSON
// patch may add to the document, as kube-apiserver's
// --json-patch-max-copy-bytes default: without it a patch of 2 KB that
// copies a list into itself 30 times grows the document past 1 GB.
const MaxJSONPatchCopyBytes = 3 << 20

// copyLimit sets the library's copy limit (a package variable of
// json-patch, read only while a patch is applied) before the first JSON
// patch; the Once orders that write before every later Apply.
var copyLimit sync.Once

// JSON applies an RFC 6902 JSON patch: a list of operations.
func JSON(doc, ops []byte) ([]byte, error) {
	copyLimit.Do(func() { jsonpatch.AccumulatedCopySizeLimit = MaxJSONPatchCopyBytes })
	p, err := jsonpatch.DecodePatch(ops)
	if err != nil {
		return nil, &Error{Reason: Malformed, Err: err}
	}
	if len(p) > MaxJSONPatchOperations {
		//lint:ignore ST1005 kube-apiserver's wording
		return nil, &Error{Reason: TooLarge, Err: fmt.Errorf("The allowed maximum operations in a JSON patch is %d, got %d", MaxJSONPatchOperations, len(p))}
	}
	for _, op := range p {
		// json-patch v4.13 dereferences the missing value of a replace or
		// test of the whole document ("path": ""): refuse it first.
		if path, _ := op.Path(); path == "" && (op.Kind() == "replace" || op.Kind() == "test") {
			if _, ok := op["value"]; !ok {
				return nil, &Error{Reason: NotApplicable, Err: fmt.Errorf("%s operation of the whole document has no value", op.Kind())}
			}
		}
	}
	out, err := p.Apply(doc)
	if err != nil {
		return nil, &Error{Reason: NotApplicable, Err: err}
	}
	return out, nil
}

// Strategic applies a strategic merge patch to doc, an object of
// apiVersion/kind, with the merge keys and directives of its Kubernetes
// struct.
func Strategic(apiVersion, kind string, doc, p []byte) ([]byte, error) {
	schema, err := Schema(apiVersion, kind)
	if err != nil {
		return nil, err
	}
	if err := checkObject(p); err != nil {
		return nil, err
	}
	out, err := strategicpatch.StrategicMergePatchUsingLookupPatchMeta(doc, p, schema)
	if err != nil {
		return nil, strategicError(err)
	}
	return out, nil
}

// ThreeWay is the patch kubectl apply sends: from current (the live
// object) to modified (the file), deleting what original (the file last
// applied; nil when unknown) set and modified no longer does. Fields only
// current has are kept. "{}" means nothing to do.
func ThreeWay(apiVersion, kind string, original, modified, current []byte) ([]byte, error) {
	schema, err := Schema(apiVersion, kind)
	if err != nil {
		return nil, err
	}
	// overwrite=true as kubectl apply's default: the file wins over
	// changes made to the live object since.
	out, err := strategicpatch.CreateThreeWayMergePatch(original, modified, current, schema, true)
	if err != nil {
		return nil, strategicError(err)
	}
	return out, nil
}

// ThreeWayFor is the patch kubectl apply sends and its type: ThreeWay's
// strategic merge patch for a kind with a Kubernetes struct, and for the
// others (custom resources: Kueue's, the PodGroup) a JSON merge patch from
// the same three documents, as kubectl computes for a custom resource
// (jsonmergepatch.CreateThreeWayJSONMergePatch: maps merge key by key,
// lists are replaced whole). "{}" means nothing to do.
func ThreeWayFor(apiVersion, kind string, original, modified, current []byte) (Type, []byte, error) {
	if HasSchema(apiVersion, kind) {
		p, err := ThreeWay(apiVersion, kind, original, modified, current)
		return StrategicPatch, p, err
	}
	p, err := jsonmergepatch.CreateThreeWayJSONMergePatch(original, modified, current)
	if err != nil {
		return MergePatch, nil, &Error{Reason: Malformed, Err: err}
	}
	return MergePatch, p, nil
}

// checkObject: merge and strategic patches are JSON objects.
func checkObject(p []byte) error {
	var m map[string]any
	if err := json.Unmarshal(p, &m); err != nil {
		return &Error{Reason: Malformed, Err: err}
	}
	if m == nil {
		return &Error{Reason: Malformed, Err: errors.New("the patch must be a JSON object, not null")}
	}
	return nil
}

// strategicError classifies errors of package strategicpatch as
// kube-apiserver does (interpretStrategicMergePatchError); the others
// (such as a value of the wrong type for its field) are malformed patches.
func strategicError(err error) error {
	switch {
	case errors.Is(err, mergepatch.ErrNoListOfLists), errors.Is(err, mergepatch.ErrPatchContentNotMatchRetainKeys):
		return &Error{Reason: NotApplicable, Err: err}
	}
	return &Error{Reason: Malformed, Err: err}
}
