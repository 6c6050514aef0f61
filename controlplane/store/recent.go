package store

import (
	"hash/maphash"
	"sync"

	"skiff.dev/skiff/api"
)

// recentWrites keeps, for the last recentMax keys written, the object as
// committed: where GuaranteedUpdate starts, instead of reading the stored
// JSON and decoding it (a pod's decode is about seven times its copy).
// It is kube-apiserver's answer too: its GuaranteedUpdate starts from the
// watch cache's object.
//
// An entry is the writer's copy the live watchers share (op.live, never
// changed), which the informers hold anyway while it is the object's
// last version, and the length and a hash of its JSON. The committer puts
// each committed create and update in and takes each delete out, before
// the writer hears of the commit, so an entry is the stored object unless
// a commit is on its way. A start from an entry is a guess GuaranteedUpdate
// checks: it writes with the entry's resourceVersion as its precondition,
// so a stale entry fails as a conflict and the next try reads the store;
// a tryUpdate error, or a result whose JSON may be the entry's (same
// length and hash: an update that may change nothing), is taken only
// once the store's object gives it. Only what someone watches has a copy
// to keep (Bolt.liveCopy), and Events are left out: many, written once,
// and updated, if ever, long after.
type recentWrites struct {
	mu      sync.Mutex
	seed    maphash.Seed
	entries map[string]recentEntry // bucket + "/" + key
	// order holds the keys in the order they were put in, the oldest at
	// order[head]: when full, the oldest key's entry goes first.
	order   []recentKey
	head, n int
}

type recentEntry struct {
	rev     int64
	obj     api.Object // the object as committed at rev; never changed
	rawLen  int        // the length of its JSON
	rawHash uint64     // maphash of its JSON
}

type recentKey struct {
	key string
	rev int64
}

// recentMax bounds the entries: objects the informers hold anyway (only
// an object's last version is kept) and about 100 bytes each besides.
const recentMax = 8192

// bucketKey names an object across buckets, "bucket/namespace/name": the
// key of the decode memo's entries (memo.go) and of recent's.
func bucketKey(bucket, key string) string { return bucket + "/" + key }

// eventsBucket is the Event kind's, which recent leaves out.
var eventsBucket = api.MustKindOf(&api.Event{}).GroupResource()

// put notes the committed events of one batch (the committer's).
func (r *recentWrites) put(events []hubEvent, keys []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.entries == nil {
		r.seed = maphash.MakeSeed()
		r.entries = make(map[string]recentEntry)
		r.order = make([]recentKey, recentMax)
	}
	for i := range events {
		e := &events[i]
		k := keys[i]
		if e.typ == api.Deleted || e.obj == nil || e.bucket == eventsBucket {
			delete(r.entries, k)
			continue
		}
		r.entries[k] = recentEntry{rev: e.rev, obj: e.obj, rawLen: len(e.raw), rawHash: maphash.Bytes(r.seed, e.raw)}
		if r.n == len(r.order) {
			old := r.order[r.head]
			if cur, ok := r.entries[old.key]; ok && cur.rev == old.rev {
				delete(r.entries, old.key)
			}
			r.head = (r.head + 1) % len(r.order)
			r.n--
		}
		r.order[(r.head+r.n)%len(r.order)] = recentKey{k, e.rev}
		r.n++
	}
}

// entry returns key's entry (its object shared: never changed) and the
// seed of its hash.
func (r *recentWrites) entry(key string) (recentEntry, maphash.Seed, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[key]
	return e, r.seed, ok
}

// get returns a private copy of key's last committed object (shared: the
// object itself, read-only, which the live watchers may hold), and a check
// of whether some JSON may be that object's: false only when it is not.
func (r *recentWrites) get(key string, shared bool) (api.Object, func(enc []byte) bool, bool) {
	e, seed, ok := r.entry(key)
	if !ok {
		return nil, nil, false
	}
	mayBe := func(enc []byte) bool { return len(enc) == e.rawLen && maphash.Bytes(seed, enc) == e.rawHash }
	if shared {
		return e.obj, mayBe, true
	}
	return api.Clone(e.obj), mayBe, true
}
