package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"time"
)

// TypeMeta names the schema of an object: apiVersion and kind, exactly as in
// Kubernetes ("v1"/"Pod", "apps/v1"/"Deployment").
type TypeMeta struct {
	// APIVersion is the group and version of the schema, e.g. "v1" or "apps/v1".
	APIVersion string `json:"apiVersion,omitempty"`
	// Kind is the type of the object, e.g. "Pod".
	Kind string `json:"kind,omitempty"`
}

// GetTypeMeta returns the type metadata; embedded types promote it so every
// object satisfies Object.
func (t *TypeMeta) GetTypeMeta() *TypeMeta { return t }

// ObjectMeta is the metadata every stored object carries.
type ObjectMeta struct {
	// Name is unique within a namespace (or the cluster, for cluster-scoped
	// kinds). Must be a DNS-1123 subdomain for most kinds.
	Name string `json:"name,omitempty"`
	// GenerateName is a prefix the API server completes with a random suffix
	// when Name is empty.
	GenerateName string `json:"generateName,omitempty"`
	// Namespace groups objects; empty means "default" for namespaced kinds.
	Namespace string `json:"namespace,omitempty"`
	// UID is set by the API server on create and never changes.
	UID string `json:"uid,omitempty"`
	// ResourceVersion is the store revision of the last write to this object.
	// Send it back on update: a stale value is rejected with 409 Conflict.
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// Generation counts changes to the spec; status writes do not bump it.
	Generation int64 `json:"generation,omitempty"`
	// CreationTimestamp is set by the API server on create.
	CreationTimestamp Time `json:"creationTimestamp,omitempty"`
	// DeletionTimestamp is set when a graceful delete has begun; the object
	// is removed when its finalizers are gone (or, for pods, when the node
	// has stopped the containers).
	DeletionTimestamp *Time `json:"deletionTimestamp,omitempty"`
	// DeletionGracePeriodSeconds is the grace period of a pending delete.
	DeletionGracePeriodSeconds *int64 `json:"deletionGracePeriodSeconds,omitempty"`
	// Labels are identifying key/value pairs used by selectors.
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are non-identifying key/value pairs for tools.
	Annotations map[string]string `json:"annotations,omitempty"`
	// OwnerReferences list the objects this one depends on; when every owner
	// is gone the garbage collector deletes it.
	OwnerReferences []OwnerReference `json:"ownerReferences,omitempty"`
	// Finalizers must all be removed before a deleting object disappears.
	Finalizers []string `json:"finalizers,omitempty"`
	// ManagedFields says which field manager owns which fields (server-side
	// apply). The API server keeps it (k8s.io/apimachinery's field manager);
	// a write that leaves it out keeps the stored one.
	ManagedFields []ManagedFieldsEntry `json:"managedFields,omitempty"`
}

// ManagedFieldsEntry is one manager's fields, as Kubernetes' (metav1).
type ManagedFieldsEntry struct {
	// Manager names the field manager: "kubectl", "kubectl-client-side-apply".
	Manager string `json:"manager,omitempty"`
	// Operation is "Apply" or "Update".
	Operation string `json:"operation,omitempty"`
	// APIVersion of the fields' schema.
	APIVersion string `json:"apiVersion,omitempty"`
	// Time of the manager's last change.
	Time *Time `json:"time,omitempty"`
	// FieldsType is "FieldsV1".
	FieldsType string `json:"fieldsType,omitempty"`
	// FieldsV1 is the set of fields, in structured-merge-diff's JSON form.
	FieldsV1 json.RawMessage `json:"fieldsV1,omitempty"`
	// Subresource is "" or "status", "scale".
	Subresource string `json:"subresource,omitempty"`
}

// GetObjectMeta returns the object metadata; embedded types promote it so
// every object satisfies Object.
func (m *ObjectMeta) GetObjectMeta() *ObjectMeta { return m }

// OwnerReference points from a dependent to its owner (ReplicaSet → Pod).
type OwnerReference struct {
	// APIVersion of the owner.
	APIVersion string `json:"apiVersion"`
	// Kind of the owner.
	Kind string `json:"kind"`
	// Name of the owner, in the dependent's namespace.
	Name string `json:"name"`
	// UID of the owner; a new object with the same name is a different owner.
	UID string `json:"uid"`
	// Controller is true for the one owner that manages this object.
	Controller *bool `json:"controller,omitempty"`
	// BlockOwnerDeletion is accepted for compatibility and has no effect.
	BlockOwnerDeletion *bool `json:"blockOwnerDeletion,omitempty"`
}

// ListMeta is the metadata of a list: the store revision it was read at.
type ListMeta struct {
	// ResourceVersion of the list; start a watch from here to miss nothing.
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// Continue is not supported (lists are never paged) and always empty.
	Continue string `json:"continue,omitempty"`
}

// Object is any API object: it has type metadata and object metadata.
// Implementations are pointers to structs embedding TypeMeta and ObjectMeta.
type Object interface {
	GetTypeMeta() *TypeMeta
	GetObjectMeta() *ObjectMeta
}

// Key is the store key of an object: "namespace/name", or "name" for
// cluster-scoped objects.
func Key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// KeyOf returns Key for an object.
func KeyOf(o Object) string {
	m := o.GetObjectMeta()
	return Key(m.Namespace, m.Name)
}

// Clone returns a deep copy of obj (a nil obj: a new empty one). Objects
// read from a store or cache are shared: copy before changing (STYLE 8).
//
// Every registered kind copies itself with the DeepCopyObject method
// Kubernetes' deepcopy-gen writes (zz_generated.deepcopy.go, made by
// hack/deepcopy.sh from the +k8s:deepcopy-gen tags); anything else is
// copied by deepCopy's reflect walk (deepcopy.go).
func Clone[T Object](obj T) T {
	if c, ok := any(obj).(objectCopier); ok {
		if cp := c.DeepCopyObject(); cp != nil {
			return cp.(T)
		}
		return newLike(obj).(T)
	}
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return newLike(obj).(T)
	}
	out := reflect.New(v.Type().Elem())
	deepCopy(out.Elem(), v.Elem())
	return out.Interface().(T)
}

// objectCopier is what deepcopy-gen generates for a type tagged
// +k8s:deepcopy-gen:interfaces=skiff.dev/skiff/api.Object: every kind's
// struct (TestEveryKindCopiesItself). DeepCopyObject of a nil pointer
// returns nil.
type objectCopier interface{ DeepCopyObject() Object }

// IsControlledBy reports whether obj's controller owner reference has uid.
func IsControlledBy(obj Object, uid string) bool {
	ref := ControllerOf(obj)
	return ref != nil && ref.UID == uid
}

// ControllerOf returns the controlling owner reference, or nil.
func ControllerOf(obj Object) *OwnerReference {
	for i, r := range obj.GetObjectMeta().OwnerReferences {
		if r.Controller != nil && *r.Controller {
			return &obj.GetObjectMeta().OwnerReferences[i]
		}
	}
	return nil
}

// NewControllerRef builds the owner reference a controller puts on what it creates.
func NewControllerRef(owner Object) OwnerReference {
	t := true
	tm, om := owner.GetTypeMeta(), owner.GetObjectMeta()
	return OwnerReference{APIVersion: tm.APIVersion, Kind: tm.Kind, Name: om.Name, UID: om.UID, Controller: &t, BlockOwnerDeletion: &t}
}

// Time is a timestamp that encodes as RFC 3339 with second precision, like
// Kubernetes' metav1.Time; the zero time encodes as null.
type Time struct{ time.Time }

// DeepCopyInto copies t for the generated deep copies
// (zz_generated.deepcopy.go): a time.Time shares only its Location, which
// is never changed.
func (t *Time) DeepCopyInto(out *Time) { *out = *t }

// Now returns the current time as a Time.
func Now() Time { return Time{time.Now().UTC().Truncate(time.Second)} }

// NewTime wraps t.
func NewTime(t time.Time) Time { return Time{t.UTC()} }

// MarshalJSON implements json.Marshaler.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return appendTimeJSON(t.Time, time.RFC3339), nil
}

// appendTimeJSON is json.Marshal of t formatted with layout, without its
// string escaping: a formatted time has nothing to escape.
func appendTimeJSON(t time.Time, layout string) []byte {
	b := make([]byte, 0, len(layout)+8)
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, layout)
	return append(b, '"')
}

// UnmarshalJSON implements json.Unmarshaler.
func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		t.Time = time.Time{}
		return nil
	}
	var s string
	if n := len(b); n >= 2 && b[0] == '"' && b[n-1] == '"' && bytes.IndexByte(b, '\\') < 0 {
		s = string(b[1 : n-1]) // nothing escaped; what is not a time, Parse refuses
	} else if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("time: expected an RFC 3339 string: %w", err)
	}
	if s == "" {
		t.Time = time.Time{}
		return nil
	}
	p, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("time %q: expected RFC 3339: %w", s, err)
	}
	t.Time = p.UTC()
	return nil
}

// MicroTime is a timestamp with microsecond precision (trace spans, events).
type MicroTime struct{ time.Time }

// DeepCopyInto copies t, as Time's does.
func (t *MicroTime) DeepCopyInto(out *MicroTime) { *out = *t }

// MarshalJSON implements json.Marshaler.
func (t MicroTime) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return appendTimeJSON(t.Time, "2006-01-02T15:04:05.000000Z07:00"), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (t *MicroTime) UnmarshalJSON(b []byte) error {
	var tt Time
	if err := tt.UnmarshalJSON(b); err != nil {
		return err
	}
	t.Time = tt.Time
	return nil
}

// WatchEventType is the type of a watch event.
type WatchEventType string

// Watch event types, as Kubernetes.
const (
	Added    WatchEventType = "ADDED"
	Modified WatchEventType = "MODIFIED"
	Deleted  WatchEventType = "DELETED"
	Bookmark WatchEventType = "BOOKMARK"
	// Error carries a Status object, e.g. 410 Gone when the requested
	// resourceVersion is older than the watch history.
	Error WatchEventType = "ERROR"
)

// WatchEvent is one line of a watch stream:
// {"type":"ADDED","object":{...}}.
type WatchEvent struct {
	Type   WatchEventType  `json:"type"`
	Object json.RawMessage `json:"object"`
}

// ListOptions select what list and watch return.
type ListOptions struct {
	// LabelSelector in kubectl syntax: "app=web,tier in (a,b),!legacy".
	LabelSelector string
	// FieldSelector: "metadata.name=x,spec.nodeName=n,status.phase!=Running".
	FieldSelector string
	// ResourceVersion: for watch, start after this revision ("" or "0" means
	// now, with the current objects sent first as ADDED). For list: "" is
	// the most recent state, "0" any state (skiff serves the most recent),
	// a revision is read as ResourceVersionMatch says.
	ResourceVersion string
	// ResourceVersionMatch, for a list with a ResourceVersion:
	// "NotOlderThan" (the default) or "Exact", as Kubernetes.
	ResourceVersionMatch string
	// TimeoutSeconds bounds a watch; 0 means the server default.
	TimeoutSeconds int64
}

// DeleteOptions control a delete, as Kubernetes' DeleteOptions body.
type DeleteOptions struct {
	TypeMeta `json:",inline"`
	// GracePeriodSeconds overrides the pod's terminationGracePeriodSeconds;
	// 0 deletes at once without waiting for the node.
	GracePeriodSeconds *int64 `json:"gracePeriodSeconds,omitempty"`
	// Preconditions must hold or the delete fails with 409.
	Preconditions *Preconditions `json:"preconditions,omitempty"`
	// PropagationPolicy: "Background" (the default: the garbage collector
	// deletes dependents after the owner) or "Foreground" (treated as
	// Background). "Orphan" is not supported and rejected.
	PropagationPolicy string `json:"propagationPolicy,omitempty"`
	// DryRun ["All"] runs the delete without removing anything, as
	// ?dryRun=All (kubectl delete --dry-run=server sends it here).
	DryRun []string `json:"dryRun,omitempty"`
}

// CheckPropagationPolicy rejects the propagation policies skiff does not
// carry out (Orphan), rather than accepting and ignoring them.
func CheckPropagationPolicy(p string) error {
	switch p {
	case "", "Background", "Foreground":
		return nil
	case "Orphan":
		return NewBadRequest(`propagationPolicy: Unsupported value: "Orphan": supported values: "Background", "Foreground" (skiff's garbage collector does not orphan dependents)`)
	}
	return NewBadRequest(fmt.Sprintf("propagationPolicy: Unsupported value: %q: supported values: \"Background\", \"Foreground\"", p))
}

// Preconditions for a delete.
type Preconditions struct {
	UID             *string `json:"uid,omitempty"`
	ResourceVersion *string `json:"resourceVersion,omitempty"`
}
