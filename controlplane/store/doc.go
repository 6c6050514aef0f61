// Package store is the cluster's source of truth: every API object, kept in
// one bbolt file, with one global revision and watches that resume.
//
// Objects live in one bucket per kind ("pods", "deployments.apps"), under
// the key "namespace/name" ("name" for cluster-scoped kinds), as JSON,
// S2-compressed with a dictionary of typical objects where that is smaller
// (value.go).
//
// Invariants:
//   - One counter, the revision, counts every successful write (create,
//     update, delete). An object's resourceVersion is the revision of its
//     last write, as a decimal string; the counter survives restarts.
//   - Writes are optimistic: an update or delete that names a stale
//     resourceVersion fails with Conflict and changes nothing.
//   - Concurrent writers share commits (group commit): one goroutine applies
//     a batch of writes in one bbolt transaction, one durable commit, and each write
//     still gets its own result. A failed write never fails its neighbours.
//   - Watchers see every change after the revision they ask for, in revision
//     order, with no gaps. History is bounded and in memory: a revision older
//     than it (or than the last restart) fails with Gone, and the client
//     lists again. A watcher too slow to keep up is closed, never waited for.
//   - Objects kind Event expire after a TTL (one hour by default).
//   - Every Get returns a private object. Namespaces and ServiceAccounts,
//     which nearly every write reads, are decoded once per stored version
//     and copied after that (memo.go), or shared with readers that never
//     change them (GetShared, store.SharedGetter); GetMeta (store.MetaGetter)
//     decodes the metadata alone, for readers that need an object's identity.
//     ListFiltered (store.FilteredLister) decodes only the objects whose
//     stored JSON its keep accepts: the API server's lists by field selector
//     (one node's ResourceSlices or pods among all).
//   - Writes are counted by kind and namespace (Writes, store.WriteCounter):
//     a reader that keeps a list knows it is still what is stored while the
//     count has not moved (the API server's admission lists, which change a
//     few times a term and are read for every pod create).
//   - Create copies the caller's object; CreateEncoded (store.EncodingCreator)
//     takes it over and hands back the JSON it stored, which the API server
//     sends as a create's response. GuaranteedUpdate writes tryUpdate's
//     result itself, and the committer stores the JSON GuaranteedUpdate
//     encoded for its no-op check, with the new revision spliced in
//     (storedmeta.go: the committer reads only the metadata it checks, from
//     the stored value decompressed into its own scratch space).
//   - A write can depend on one still queued (store.Chainer, queued.go):
//     UpdateQueued returns once the update is queued, and CreateEncodedAfter
//     is applied only if the writes it depends on were, else fails with
//     ErrDependencyFailed, writing nothing. Quota admission's charge and the
//     create it admits share a commit so.
//   - Live watchers share one copy of each committed object, the one the
//     writer copied before the commit (watch.go), or the writer's object
//     itself when the writer only reads it after (CreateEncoded's share:
//     the API server's create handler) or drops it (GuaranteedUpdateShared,
//     store.SharingUpdater: its binding); a replay decodes the history's
//     JSON. GuaranteedUpdate starts from a copy of the last write of the
//     object when it is among the last 8,192 (recent.go), and checks what
//     that start decides against the store, as kube-apiserver does with its
//     watch cache; GuaranteedUpdateReadOnly (store.ReadOnlyUpdater: the API
//     server's pod status write) starts from that write itself, which the
//     live watchers share, for a tryUpdate that only reads it. GetMeta
//     answers from that last write too: the committer puts every committed
//     write in and takes deletes out, so it is the stored object.
//
// Bolt is the implementation for one machine; Store is the interface the
// API server uses, and etcdstore implements it on etcd for several. Both
// pass one test suite, storetest.
package store
