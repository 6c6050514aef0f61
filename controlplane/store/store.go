package store

import (
	"context"

	"skiff.dev/skiff/api"
)

// Store is the cluster's source of truth: objects by kind and key, one
// global revision that is every object's resourceVersion, and watches that
// resume from a revision.
//
// Rules every implementation keeps:
//   - Objects passed in are not retained; objects returned are fresh copies
//     the caller may change.
//   - Every successful write gets a new, strictly increasing revision, set
//     as the returned object's metadata.resourceVersion. (A store's own
//     expiry of Events may delete several in one revision: etcd's leases.)
//   - Errors are *api.StatusError: NotFound, AlreadyExists, Conflict (stale
//     resourceVersion or failed precondition), Gone (watch or exact list
//     too old), Timeout with cause ResourceVersionTooLarge (an exact list
//     of a revision the store has not reached); ErrClosed after Close, and
//     ctx's error when ctx ends while waiting.
//   - All methods are safe for concurrent use; ctx bounds waiting for a
//     commit, not the commit itself (a write that started may still land).
//
// The store does no validation, defaulting or generation bumping: that is
// the API server's job. It does set uid and creationTimestamp on Create
// when they are empty.
type Store interface {
	// Create stores a new object. It fails with AlreadyExists when the key is taken.
	Create(ctx context.Context, obj api.Object) (api.Object, error)
	// Update replaces an existing object. When obj's resourceVersion is set
	// it must equal the stored one, or Update fails with Conflict.
	Update(ctx context.Context, obj api.Object) (api.Object, error)
	// GuaranteedUpdate reads the current object, calls tryUpdate on a copy
	// and writes the result, retrying on conflict. tryUpdate returning an
	// error aborts with that error. Returning the unchanged object is a no-op
	// that does not bump the revision. What tryUpdate returns is the
	// store's from then on: the store may set its metadata and hand it
	// back, so tryUpdate builds it from cur or a copy and keeps no
	// reference to it.
	GuaranteedUpdate(ctx context.Context, kind *api.Kind, namespace, name string, tryUpdate func(cur api.Object) (api.Object, error)) (api.Object, error)
	// Delete removes an object and returns its last state (with a new
	// resourceVersion: the revision of the delete). Preconditions, when
	// given, must hold or it fails with Conflict.
	Delete(ctx context.Context, kind *api.Kind, namespace, name string, pre *api.Preconditions) (api.Object, error)
	// Get returns one object or NotFound.
	Get(ctx context.Context, kind *api.Kind, namespace, name string) (api.Object, error)
	// List returns every object of a kind (in one namespace, or all when
	// namespace is ""), sorted by key, and the revision it was read at.
	List(ctx context.Context, kind *api.Kind, namespace string) ([]api.Object, int64, error)
	// ListExact returns the objects of a kind (in one namespace, or all when
	// namespace is ""), sorted by key, as they were at revision rev > 0. A
	// store that keeps only current objects (bbolt) serves rev when nothing
	// of the kind (in namespace) changed after it, as its watch history
	// shows; it fails with Gone when something did or the history does not
	// reach back to rev. A store that keeps past versions (etcd) serves any
	// rev since its compaction and fails with Gone before. Both fail with
	// Timeout ResourceVersionTooLarge when rev is newer than the current
	// revision (WaitForRevision first).
	ListExact(ctx context.Context, kind *api.Kind, namespace string, rev int64) ([]api.Object, error)
	// Watch streams changes to a kind (in one namespace or all) after
	// revision rev. rev 0 means "from now". A rev older than the watch
	// history fails with Gone: the caller must list again and watch from the
	// list's revision. The channel closes when ctx ends or the watcher falls
	// too far behind (the caller then resumes from its last revision).
	// An event's object may be shared with the other watchers of that
	// change: never modify it.
	Watch(ctx context.Context, kind *api.Kind, namespace string, rev int64) (<-chan Event, error)
	// Revision is the current global revision: for a store that several
	// servers share (etcd), the newest this one has seen.
	Revision() int64
	// WaitForRevision blocks until the store has reached revision rev (its
	// writes up to rev are visible to Get, List and Watch), ctx ends (ctx's
	// error) or the store closes (ErrClosed). It never sleeps: commits wake it.
	WaitForRevision(ctx context.Context, rev int64) error
	// Close flushes pending commits and closes the database. Safe twice.
	Close() error
}

// Counter is a store that counts a kind's objects (in one namespace, or
// all when namespace is "") without decoding them, as List would see them
// (Bolt). ResourceQuota admission asks for every write whether its
// namespace has a quota at all.
type Counter interface {
	Count(ctx context.Context, kind *api.Kind, namespace string) (int, error)
}

// FilteredLister is a store that lists the objects of a kind whose stored
// JSON keep accepts, and decodes no other (Bolt). keep sees each object's
// JSON as the store wrote it, encoding/json's Marshal of the object
// (compact), valid only during the call. The API server lists with a field
// selector so, testing the JSON for the selected values first
// (api.FieldNeedles): the DRA plugin's read of one node's ResourceSlices
// after each binding decoded the slices of every node.
type FilteredLister interface {
	ListFiltered(ctx context.Context, kind *api.Kind, namespace string, keep func(json []byte) bool) ([]api.Object, int64, error)
}

// MetaGetter is a store that reads one object's metadata without decoding
// the rest (Bolt): the object of kind it returns has only its type and
// metadata set (api.DecodeStoredMeta). The API server asks for it where
// an object's identity is all it needs: a trace append checks that the
// pod exists and which UID it has, after every bind.
type MetaGetter interface {
	GetMeta(ctx context.Context, kind *api.Kind, namespace, name string) (api.Object, error)
}

// WriteCounter is a store that counts the writes it has committed to each
// kind in each namespace ("" for a cluster-scoped kind) since it opened
// (Bolt). A count only grows, and a write is counted before its writer
// hears of it: a reader that noted the count before it read knows that
// what it read is still what is stored while the count has not moved.
// ResourceQuota admission keeps a namespace's quotas so between batches.
type WriteCounter interface {
	Writes(kind *api.Kind, namespace string) uint64
}

// SharedGetter is a store that hands a reader who never changes what it
// gets an object shared with other such readers, without Get's copy
// (Bolt: its memo's namespaces and ServiceAccounts). The API server reads
// the namespace and the ServiceAccount of every create this way.
type SharedGetter interface {
	GetShared(ctx context.Context, kind *api.Kind, namespace, name string) (api.Object, error)
}

// EncodingCreator is a store that creates an object the caller gives up
// and hands back the JSON it stored (Bolt): encoding/json's Marshal of the
// returned object, byte for byte. The API server sends those bytes as its
// response to a create instead of encoding the object a second time.
// Neither the caller nor the store may change the bytes. obj is not copied:
// on success it is the object returned (its resourceVersion set, and a uid
// and creationTimestamp where it had none); after an error it may have
// been changed so. Create copies the caller's object.
//
// share says that the caller only reads the returned object from then
// on, as the API server's create handler does (it sends the JSON): the
// store then hands that same object to its live watchers instead of a
// copy of it, and nobody may change it any more.
type EncodingCreator interface {
	CreateEncoded(ctx context.Context, obj api.Object, share bool) (api.Object, []byte, error)
}

// SharingUpdater is GuaranteedUpdate for a caller that drops the object it
// writes, as the API server's binding does (its answer is a Status): the
// store hands tryUpdate's result itself to its live watchers instead of a
// copy of it (Bolt), and nobody may change it once tryUpdate returned it.
type SharingUpdater interface {
	GuaranteedUpdateShared(ctx context.Context, kind *api.Kind, namespace, name string, tryUpdate func(cur api.Object) (api.Object, error)) error
}

// ReadOnlyUpdater is GuaranteedUpdate for a tryUpdate that only reads cur
// and returns an object of its own, as the API server's pod status write
// does (it copies cur and sets the status): cur may then be the object
// the store's live watchers share instead of a private copy of it (Bolt).
// tryUpdate must not change cur.
type ReadOnlyUpdater interface {
	GuaranteedUpdateReadOnly(ctx context.Context, kind *api.Kind, namespace, name string, tryUpdate func(cur api.Object) (api.Object, error)) (api.Object, error)
}

// Event is one change seen by a watch.
type Event struct {
	// Type: Added, Modified or Deleted.
	Type api.WatchEventType
	// Object after the change (for Deleted: its last state with the delete's revision).
	Object api.Object
	// Revision of the change.
	Revision int64
}
