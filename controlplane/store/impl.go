package store

import (
	"fmt"

	"skiff.dev/skiff/api"
)

// Helpers for implementations of Store (Bolt here, etcdstore.Store): one
// implementation of each rule and of each error, so that every store
// answers a client word for word alike.

// Prepare finds obj's kind and returns a private copy with its type meta
// set; it fails with BadRequest for a nil object, an unknown kind or an
// empty name.
func Prepare(obj api.Object) (*api.Kind, api.Object, error) { return prepare(obj) }

// Decode turns stored JSON into a fresh object of kind k (Internal on
// failure).
func Decode(k *api.Kind, raw []byte) (api.Object, error) { return decode(k, raw) }

// ParseRevision parses a resourceVersion: a positive decimal integer, or
// BadRequest.
func ParseRevision(rv string) (int64, error) { return parseRevision(rv) }

// FormatRevision is a revision as a resourceVersion.
func FormatRevision(rev int64) string { return formatRevision(rev) }

// NewUID returns a random RFC 4122 version 4 UUID, as Create sets.
func NewUID() string { return newUID() }

// CheckTryUpdate checks what a GuaranteedUpdate's tryUpdate returned: an
// object of kind with the same namespace and name, or BadRequest.
func CheckTryUpdate(kind *api.Kind, namespace, name string, next api.Object) error {
	if next == nil {
		return api.NewBadRequest(fmt.Sprintf("update %s %q: tryUpdate returned no object", kind.GroupResource(), name))
	}
	if k, err := api.KindOf(next); err != nil || k.GroupResource() != kind.GroupResource() {
		return api.NewBadRequest(fmt.Sprintf("update %s %q: tryUpdate returned a %T", kind.GroupResource(), name, next))
	}
	if m := next.GetObjectMeta(); m.Namespace != namespace || m.Name != name {
		return api.NewBadRequest(fmt.Sprintf("update %s %q: tryUpdate changed the object's name or namespace", kind.GroupResource(), name))
	}
	return nil
}

// ErrModified is the Conflict of an update naming a stale resourceVersion,
// in kube-apiserver's words.
func ErrModified(k *api.Kind, name string) error {
	return api.NewConflict(k, name, "the object has been modified; please apply your changes to the latest version and try again")
}

// ErrUIDPrecondition is the Conflict of a write whose uid (precondition or
// object's) is not the stored object's.
func ErrUIDPrecondition(k *api.Kind, name, want, stored string) error {
	return api.NewConflict(k, name, fmt.Sprintf("Precondition failed: UID in precondition: %s, UID in object meta: %s", want, stored))
}

// ErrResourceVersionPrecondition is the Conflict of a delete whose
// resourceVersion precondition is not the stored object's.
func ErrResourceVersionPrecondition(k *api.Kind, name, want, stored string) error {
	return api.NewConflict(k, name, fmt.Sprintf("Precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s", want, stored))
}

// ErrWatchTooOld is the Gone of a watch from rev when the history holds
// only the changes after oldest: "too old resource version: 2 (3)", as
// kube-apiserver's watch cache says it.
func ErrWatchTooOld(rev, oldest int64) error {
	return api.NewGone(fmt.Sprintf("too old resource version: %d (%d)", rev, oldest))
}

// ErrListTooOld is the Gone of an exact list of a revision the store can no
// longer serve.
func ErrListTooOld() error {
	return api.NewGone("The resourceVersion for the provided list is too old.")
}

// ErrBadListRevision is the BadRequest of an exact list of rev <= 0.
func ErrBadListRevision(rev int64) error {
	return api.NewBadRequest(fmt.Sprintf("invalid resourceVersion %d: an exact list needs a positive revision", rev))
}

// ErrBadWatchRevision is the BadRequest of a watch from a negative revision.
func ErrBadWatchRevision(rev int64) error {
	return api.NewBadRequest(fmt.Sprintf("invalid resourceVersion %d", rev))
}
