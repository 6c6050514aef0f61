// Package etcdstore is a store.Store on etcd v3, the distributed
// key-value store Kubernetes and k3s keep their objects in: for a control
// plane of several servers, where the bbolt store (one file on one
// machine) no longer fits. It passes the same suite (storetest) as bbolt.
//
// # Keys
//
// Each object is one key, its JSON the value (without resourceVersion):
//
//	PREFIX<resource>/<namespace>/<name>   namespaced kinds
//	PREFIX<resource>/<name>               cluster-scoped kinds
//
// PREFIX is "/skiff/registry/" by default and resource is the kind's
// group resource ("pods", "deployments.apps"). A list is a range read of
// PREFIX<resource>/[<namespace>/]; a watch watches that range.
//
// # Revisions
//
// etcd counts every change of the whole key space in one revision, as the
// bbolt store does: an object's resourceVersion is the mod revision of its
// key, and a write's result carries the revision of its transaction. A
// fresh etcd is at revision 1 (bbolt at 0). Writes are transactions on the
// key's revisions: Create succeeds when the key has no create revision,
// Update and Delete when its mod revision is the one read (and the
// resourceVersion asked for), else AlreadyExists or Conflict.
//
// # History and Gone
//
// etcd keeps past versions of every key (MVCC) until a compaction; so
// ListExact serves any revision since the last compaction (the bbolt
// store serves only revisions after which the kind did not change), and a
// watch from a revision replays from etcd's history. A revision older than
// the compaction is Gone (410): a ListExact fails with "The resourceVersion
// for the provided list is too old.", a Watch with "too old resource
// version: REV (COMPACTED)", and the client lists again.
//
// # Compaction
//
// Without compaction etcd keeps every version of every key and its
// database grows until it hits its quota (2 GiB) and refuses writes. With
// Options.CompactInterval (DefaultOptions: 5 minutes, kube-apiserver's
// --etcd-compaction-interval) the store compacts as kube-apiserver's
// storage/etcd3 compactor does: every interval it writes the current
// revision into CompactKey ("compact_rev_key") in a transaction that
// succeeds only if the key is at the version this store last saw, and, when
// it succeeded, compacts to the revision it wrote one interval before. Of
// several servers on one etcd the first each interval wins the
// transaction and compacts; the others only learn the key's new version.
// So history always covers at least the last interval: a watch that falls
// further behind, or a list of an older resourceVersion, is Gone and
// lists again. 0 turns compaction off (tests that read old revisions,
// `skiff snapshot migrate`); an operator's etcd --auto-compaction may run
// beside it.
//
// # Events
//
// Objects of kind Event are written with an etcd lease of EventTTL (one
// hour), renewed by every write of the Event: etcd deletes them when the
// lease ends, and watchers see the deletes. Events written within a
// twentieth of the TTL share one lease, so an Event lives between EventTTL
// and 1.05 EventTTL after its last write (bbolt: EventTTL after its
// lastTimestamp), and Events that share a lease expire in one
// transaction: one revision for all their deletes.
//
// # Revision and waiting
//
// Revision is the newest revision this store has seen: of its own
// replies and of a watch it keeps on PREFIX, so writes of other servers
// advance it too. WaitForRevision never sleeps: it reads once (a
// linearizable read answers with the cluster's revision), then waits for
// that watch.
package etcdstore
